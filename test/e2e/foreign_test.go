package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

const foreignSamples = "metrics_ring_storage_samples_rejected_total"

// TestForeignReportsAreDropped: one kubelet also reports another node's pods at 1000 times their values, as the old
// node of a pod recreated elsewhere does while it terminates (DESIGN.md section 2, "Whose samples count"). The
// victims' pods are served exactly their own node's values, collection after collection, the reporting node's own
// pods are unaffected, and /metrics counts the dropped samples as reason="foreign".
func TestForeignReportsAreDropped(t *testing.T) {
	nodes := env.sim.Nodes()
	thief, victim := nodes[0], nodes[1]
	foreign := func(ctx context.Context) (float64, error) {
		m, err := env.kubelet.SelfMetrics(ctx)
		if err != nil {
			return 0, err
		}
		return m.Sum(foreignSamples, map[string]string{"reason": "foreign"}), nil
	}
	before, err := foreign(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := env.sim.SetForeign(thief, victim, 1000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.sim.SetForeign(thief, "", 0) })

	var victims, own []string
	perCollection := 0 // foreign samples the thief offers each collection: every container of the victim's pods
	for _, p := range env.sim.Pods() {
		switch p.Node {
		case victim:
			victims = append(victims, p.Namespace+"/"+p.Name)
			perCollection += len(p.Containers)
		case thief:
			own = append(own, p.Namespace+"/"+p.Name)
		}
	}
	// Three collections' worth of foreign samples: had they been stored, the victims' rings would hold them.
	framework.Eventually(t, "foreign samples to be counted", settle, func(ctx context.Context) error {
		after, err := foreign(ctx)
		if err != nil {
			return err
		}
		if after-before < float64(3*perCollection) {
			return fmt.Errorf("%s{reason=\"foreign\"} grew by %v, want at least %d", foreignSamples, after-before, 3*perCollection)
		}
		return nil
	})
	check := func(ctx context.Context, keys []string) error {
		var errs []error
		for _, key := range keys {
			ns, name, _ := strings.Cut(key, "/")
			errs = append(errs, podMatchesTruth(ctx, ns, name))
		}
		return errors.Join(errs...)
	}
	// Exactly, not eventually: every read over the next collections must be the truth. A mixed ring would serve
	// 1000 times the memory whenever the thief's sample was the newest, and a rate across both nodes' counters.
	for round := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), settle)
		err := check(ctx, append(victims, own...))
		cancel()
		if err != nil {
			t.Fatalf("read %d, with %s reporting %s's pods at 1000x: %v", round, thief, victim, err)
		}
		waitCollection(t)
	}
}

// waitCollection waits until the served resourceVersion moves on: one collection has landed.
func waitCollection(t *testing.T) {
	t.Helper()
	rv := func(ctx context.Context) (string, error) {
		l, err := env.metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		return l.ResourceVersion, nil
	}
	first, err := rv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the next collection", settle, func(ctx context.Context) error {
		now, err := rv(ctx)
		if err != nil {
			return err
		}
		if now == first {
			return fmt.Errorf("resourceVersion still %s", now)
		}
		return nil
	})
}
