package deploy

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// The chart's release for TestHelmTLSVerifiedByAggregator: its own Service name (so its certificate names
// it), on its own loopback address.
const (
	helmTLSService, helmTLSIP = "metrics-ring-helm-kubelet", "127.0.0.4"
)

// TestHelmTLSVerifiedByAggregator: with tls.type=helm, metrics-ring serving the chart's Secret's certificate is
// verified by the real aggregator against the caBundle the chart put in its APIServices (no
// insecureSkipTLSVerify): the APIServices become Available and kubectl top answers through them. This cluster
// runs no pods, so the server runs as a process (as the ServiceAccount, with the manifests' RBAC) and gets the
// Secret's files as a pod would get them mounted; the chart's APIServices are applied as rendered but for
// service.port, set to where the processes listen. Under another CA the aggregator refuses the same server.
// Afterwards the APIServices go back to replica A.
func TestHelmTLSVerifiedByAggregator(t *testing.T) {
	replicaA(t)
	helm, err := framework.EnsureHelm(framework.DefaultCacheDir(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rendered, err := run(ctx, helm, "template", releaseName, filepath.Join(env.repo, "manifests", "charts", "metrics-ring"),
		"--namespace", namespace, "--set", "tls.type=helm", "--set", "fullnameOverride=metrics-ring-helm",
		"--set", fmt.Sprintf("service.port=%d", env.api.Port))
	if err != nil {
		t.Fatalf("%v\n%s", err, rendered)
	}
	secret, apiServices, err := secretAndAPIServices(rendered)
	if err != nil {
		t.Fatal(err)
	}
	if len(apiServices) != len(framework.APIServiceNames) || apiServices[0].Spec.Service.Name != helmTLSService {
		t.Fatalf("want %d APIServices for Service %s, got %+v", len(framework.APIServiceNames), helmTLSService, apiServices)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for f, data := range map[string][]byte{certFile: secret.Data["tls.crt"], keyFile: secret.Data["tls.key"]} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Later flags win: the chart's certificate replaces the one the framework issued.
	args := append(framework.KubeletSourceArgs(env.simCA), "--source=kubelet", "--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile)
	b := startAside(t, framework.BackendConfig{Service: helmTLSService, IP: helmTLSIP, Resolution: resolution,
		Args: append(args, framework.IdentityArgs(env.saKube)...)})
	// The control: the same server behind the framework's caBundle, which did not sign its certificate, is
	// refused by the aggregator, so Available below means the chart's caBundle verified it.
	if err := env.api.PointAPIService(ctx, helmTLSService); err != nil {
		t.Fatal(err)
	}
	err = framework.Poll(ctx, "the aggregator to refuse the chart's certificate under another CA", 250*time.Millisecond, time.Minute,
		func(ctx context.Context) (bool, error) {
			ok, msg, err := env.api.APIServiceAvailable(ctx)
			if err != nil || ok || !strings.Contains(msg, "x509") {
				return false, fmt.Errorf("available %v: %s (%v)", ok, msg, err)
			}
			return true, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, a := range strings.Split(rendered, "\n---\n") {
		if strings.Contains(a, "\nkind: APIService\n") {
			docs = append(docs, a)
		}
	}
	if _, _, err := env.cp.KubectlStreams(ctx, strings.Join(docs, "\n---\n"), "", "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	for _, name := range framework.APIServiceNames {
		out, err := env.cp.KubectlOutput(ctx, "", "get", "apiservice", name, "-o", "jsonpath={.spec.insecureSkipTLSVerify}/{.spec.caBundle}")
		if err != nil {
			t.Fatal(err)
		}
		if want := "/" + base64.StdEncoding.EncodeToString(secret.Data["ca.crt"]); out != want {
			t.Fatalf("APIService %s as stored: insecureSkipTLSVerify/caBundle %.80q..., want no skip and the Secret's ca.crt", name, out)
		}
	}
	if err := env.api.WaitAvailable(ctx, b, 2*time.Minute); err != nil {
		t.Fatalf("the aggregator did not accept the chart's certificate with the chart's caBundle: %v\n%s", err, b.Proc.Tail(20))
	}
	framework.Eventually(t, "kubectl top nodes through the chart's verified APIServices", settle, func(ctx context.Context) error {
		return env.cp.TopNodesMatchTruth(ctx, env.sim.Truth().Nodes, nil)
	})
}

// secretAndAPIServices decodes the Secret and the APIServices from a helm template stream.
func secretAndAPIServices(rendered string) (*corev1.Secret, []apiregv1.APIService, error) {
	var secret *corev1.Secret
	var apis []apiregv1.APIService
	for _, d := range strings.Split(rendered, "\n---\n") {
		switch {
		case strings.Contains(d, "\nkind: Secret\n"):
			secret = &corev1.Secret{}
			if err := yaml.Unmarshal([]byte(d), secret); err != nil {
				return nil, nil, fmt.Errorf("decoding the Secret: %w", err)
			}
		case strings.Contains(d, "\nkind: APIService\n"):
			var a apiregv1.APIService
			if err := yaml.Unmarshal([]byte(d), &a); err != nil {
				return nil, nil, fmt.Errorf("decoding an APIService: %w", err)
			}
			apis = append(apis, a)
		}
	}
	if secret == nil {
		return nil, nil, fmt.Errorf("no Secret in the rendered chart")
	}
	return secret, apis, nil
}

// startAside starts a backend beside replica A for one test; when the test ends the APIServices go back to A
// and the backend stops.
func startAside(t *testing.T, cfg framework.BackendConfig) *framework.Backend {
	t.Helper()
	b, err := env.api.StartBackend(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restoreAPIServices(context.Background()); err != nil {
			t.Error(err)
		}
		b.Proc.Stop(10 * time.Second)
	})
	return b
}

// restoreAPIServices points the APIServices back at replica A with the framework's caBundle, and waits for them.
func restoreAPIServices(ctx context.Context) error {
	patch := fmt.Sprintf(`{"spec":{"caBundle":%q,"service":{"name":%q}}}`, base64.StdEncoding.EncodeToString(env.api.ServingCA.CertPEM), serviceA)
	for _, name := range framework.APIServiceNames {
		if _, err := env.cp.KubectlOutput(ctx, "", "patch", "apiservice", name, "--type=merge", "-p", patch); err != nil {
			return err
		}
	}
	return env.api.WaitAvailable(ctx, env.a, 2*time.Minute)
}
