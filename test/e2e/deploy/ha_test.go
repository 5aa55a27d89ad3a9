package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// replicaComplete reads the node and pod metrics from one replica directly (not through the aggregator) and
// checks they are complete and true.
func replicaComplete(ctx context.Context, r *framework.Backend) error {
	var nodes metricsv1beta1.NodeMetricsList
	var pods metricsv1beta1.PodMetricsList
	for path, into := range map[string]any{
		"/apis/metrics.k8s.io/v1beta1/nodes": &nodes,
		"/apis/metrics.k8s.io/v1beta1/pods":  &pods,
	} {
		code, body, err := r.Get(ctx, path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", r.Service, path, err)
		}
		if code != http.StatusOK {
			return fmt.Errorf("%s %s: status %d: %s", r.Service, path, code, body)
		}
		if err := json.Unmarshal([]byte(body), into); err != nil {
			return fmt.Errorf("%s %s: decoding: %w", r.Service, path, err)
		}
	}
	if err := completeAndTrue(&nodes, &pods); err != nil {
		return fmt.Errorf("%s: %w", r.Service, err)
	}
	return nil
}

// TestHighAvailability (the high-availability overlay's promise): two kubelet-source replicas scrape the same
// kubelets independently and each answers every node and pod with the truth on its own; kubectl top served by
// replica A keeps answering correctly after A is killed and the APIService is pointed at replica B with the
// README's one-command patch, and B's answers follow the workload from then on. In a cluster the overlay's
// one Service balances over both pods' endpoints, so the aggregator needs no patch; here each replica has its
// own ExternalName Service and loopback address, and the patch stands for the endpoint going away.
func TestHighAvailability(t *testing.T) {
	a := replicaA(t)
	ctx := context.Background()
	b, err := startReplica(ctx, serviceB, ipB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restoreReplicaA(t, a, b) })

	for _, r := range []*framework.Backend{a, b} {
		framework.Eventually(t, r.Service+" to answer every node and pod with the truth on its own", settle, func(ctx context.Context) error {
			return replicaComplete(ctx, r)
		})
	}
	framework.Eventually(t, "kubectl top served by "+serviceA+" to print the truth", settle, kubectlTopMatchesTruth)

	a.Proc.Kill()
	// With A gone the aggregator has nowhere to send requests, so the answers that follow are B's.
	framework.Eventually(t, "kubectl top to fail while the APIService points at the killed "+serviceA, settle, func(ctx context.Context) error {
		if out, err := env.cp.KubectlOutput(ctx, "", "top", "nodes"); err == nil {
			return fmt.Errorf("kubectl top nodes still answers with %s killed:\n%s", serviceA, out)
		}
		return nil
	})
	patch := fmt.Sprintf(`{"spec":{"service":{"name":%q}}}`, serviceB)
	for _, name := range framework.APIServiceNames { // the README's swap: every version's APIService
		if _, err := env.cp.KubectlOutput(ctx, "", "patch", "apiservice", name, "--type=merge", "-p", patch); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, "kubectl top served by "+serviceB+" to print the truth", settle, kubectlTopMatchesTruth)

	// B's answers are its own scrapes, not what it held when A died: a workload change shows up.
	keys := slices.Sorted(maps.Keys(env.sim.Truth().Pods))
	ns, pod, _ := strings.Cut(keys[0], "/")
	if err := env.sim.SetPod(ns, pod, 0.25, 300<<20); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "kubectl top served by "+serviceB+" to follow a change of pod "+keys[0], settle, kubectlTopMatchesTruth)
	if exited, _ := b.Proc.Exited(); exited {
		t.Fatalf("%s exited; log: %s", serviceB, b.Proc.LogFile)
	}
}

// restoreReplicaA leaves the cluster as replicaA set it up: B stopped, A running behind the APIService.
func restoreReplicaA(t *testing.T, a, b *framework.Backend) {
	ctx := context.Background()
	b.Proc.Stop(10 * time.Second)
	if exited, _ := a.Proc.Exited(); exited {
		if err := a.Restart(); err != nil {
			t.Errorf("restarting %s: %v", serviceA, err)
			return
		}
	}
	if err := a.WaitReady(ctx, 2*time.Minute); err != nil {
		t.Errorf("restarting %s: %v", serviceA, err)
		return
	}
	if err := env.api.PointAPIService(ctx, serviceA); err != nil {
		t.Errorf("pointing the APIService back at %s: %v", serviceA, err)
		return
	}
	if err := env.api.WaitAvailable(ctx, a, 3*time.Minute); err != nil {
		t.Errorf("restoring %s: %v", serviceA, err)
	}
}
