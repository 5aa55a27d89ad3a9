package realinstall

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// secondNodeName is the real node TestHighAvailability starts beside the first, for as long as it runs.
const secondNodeName = "real-node-2"

// The high-availability overlay: two replicas, one per node (required anti-affinity), a PodDisruptionBudget of
// one available, replaced one at a time.
var haOverlay = kustomized("high-availability", 2)

// TestHighAvailability: manifests/overlays/high-availability on two real nodes (a second kubelet and containerd
// beside the first, framework.RealNode.StartAnother), as a user installs it with their image: both replicas run on
// different nodes behind both APIServices, kubectl top shows each node and the burner's truth, the pages of a
// list continue across the replicas (every pod once, no error), and `kubectl drain` of one replica's node fails
// no kubectl top while the PodDisruptionBudget refuses to evict the other replica.
func TestHighAvailability(t *testing.T) {
	needNode(t)
	second := startSecondNode(t)
	ensureInstalled(t, haOverlay)
	t.Cleanup(func() { uninstall(t) }) // before the second node stops (cleanups run last first)
	topShowsTruth(t)
	framework.Eventually(t, "kubectl top node to show both real nodes", time.Minute, func(ctx context.Context) error {
		return topShowsNodes(ctx, nodeName, second.Name)
	})
	pagedListAcrossReplicas(t)
	drainKeepsServing(t, second.Name)
}

// startSecondNode starts the second real node, admits it and imports metrics-ring's image into it; it stops, and
// its Node goes, when the test ends. Where two real nodes cannot run side by side the test skips saying why, but
// under CI=true it fails: CI machines are this machine's kind, where two ran.
func startSecondNode(t *testing.T) *framework.RealNode {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	second, err := env.node.StartAnother(ctx, env.cp, secondNodeName)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a second real node (CI=true: failing instead of skipping): %v", err)
		}
		t.Skipf("a second real node cannot run beside the first here: %v", err)
	}
	t.Cleanup(func() {
		second.Stop()
		if err := env.cp.Client.CoreV1().Nodes().Delete(context.Background(), second.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting node %s: %v", second.Name, err)
		}
	})
	t.Logf("node %s Ready %.1f s after its start (kubelet %s on %s:%d, cgroup root %s)",
		second.Name, time.Since(start).Seconds(), second.KubeletVersion, second.IP, second.Port, second.CgroupRoot)
	if err := admitRealNode(ctx, second.Name); err != nil {
		t.Fatal(err)
	}
	if err := second.ImportImages(ctx, env.archive); err != nil {
		t.Fatal(err)
	}
	return second
}

// topShowsNodes checks that kubectl top node prints a row with values for each node named.
func topShowsNodes(ctx context.Context, names ...string) error {
	out, err := env.cp.KubectlOutput(ctx, "", "top", "node", "--no-headers")
	if err != nil {
		return err
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) >= 5 {
			rows[f[0]] = f
		}
	}
	for _, name := range names {
		if f, ok := rows[name]; !ok || f[1] == "<unknown>" || f[3] == "<unknown>" {
			return fmt.Errorf("kubectl top node: no values for %s in\n%s", name, out)
		}
	}
	return nil
}
