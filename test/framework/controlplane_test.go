package framework

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestControlPlane brings up etcd and kube-apiserver, uses them through kubectl and client-go, restarts the
// apiserver and checks that Stop leaves no process behind.
func TestControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	var progress bytes.Buffer
	tools, err := EnsureControlPlaneTools(DefaultCacheDir(), &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := Start(ctx, Options{Tools: tools, Dir: t.TempDir(), Out: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	defer cp.Stop()
	defer func() {
		if t.Failed() {
			cp.DumpLogs(os.Stderr, 40)
		}
	}()

	getNS := func() {
		t.Helper()
		out, err := exec.CommandContext(ctx, tools.Kubectl, "--kubeconfig="+cp.AdminKubeconfig, "get", "ns", "kube-system", "-o", "name").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "namespace/kube-system" {
			t.Fatalf("kubectl get ns: %v: %s", err, out)
		}
	}
	getNS()
	if _, err := cp.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{}); err != nil {
		t.Fatalf("the aggregation authentication ConfigMap is missing: %v", err)
	}

	// A user without RBAC is authenticated (client CA) but denied.
	_, cfg, err := cp.UserKubeconfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 10 * time.Second
	if err := Poll(ctx, "403 for nobody", time.Second, time.Minute, func(ctx context.Context) (bool, error) {
		return checkForbidden(ctx, cfg)
	}); err != nil {
		t.Fatal(err)
	}

	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	getNS()

	procs := append([]*Process(nil), cp.procs...)
	cp.Stop()
	for _, p := range procs {
		if exited, _ := p.Exited(); !exited {
			t.Errorf("%s still running after Stop", p.Name)
		}
	}
}
