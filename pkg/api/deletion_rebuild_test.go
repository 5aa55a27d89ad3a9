package api

import (
	"context"
	"fmt"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/component-base/metrics/testutil"
)

// TestUnservedDeletionRebuildsNothing (a review's finding): storage's Removals is one counter for every node
// and pod, and every build of the current snapshot made before it grew is made anew by its next request; it was
// bumped even for a pod that was never served (bound, not yet scraped twice: no publication follows), so churn
// anywhere (a Job's short-lived pods in another namespace) made every reader's large list a full build per
// deletion: ten deletions in ns-b, of pods no list ever served, cost ten full builds of ns-a's 600 pods.
func TestUnservedDeletionRebuildsNothing(t *testing.T) {
	c := clusterOf600(t)
	s := c.podStorage()
	registerMetrics()
	nsA := genericapirequest.WithNamespace(context.Background(), "ns-a")
	list := func() any {
		t.Helper()
		obj, err := s.List(nsA, &metainternalversion.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	first := list()
	if list() != first {
		t.Fatal("two lists of ns-a in one snapshot were not shared: the test no longer checks the rebuilds")
	}
	gen, before := c.store.Latest().Generation(), buildsSoFar(t)
	for i := range 10 {
		name := fmt.Sprintf("job-%d", i)
		c.addPod("ns-b", name) // Running and bound, never scraped: never served
		_ = c.pods.Delete(podMeta("ns-b", name, nil))
		c.store.PodDeleted("ns-b", name)
		list()
	}
	if g := c.store.Latest().Generation(); g != gen {
		t.Fatalf("storage published (generation %d to %d): the test no longer checks one snapshot", gen, g)
	}
	if n := buildsSoFar(t) - before; n > 0 {
		t.Errorf("10 deletions of never-served pods in ns-b made ns-a's list of 600 pods %v times anew in one snapshot, want 0", n)
	}
}

// clusterOf600 is a cluster whose ns-a has 600 pods (p000 to p599) served at 0.1 cores after one cycle.
func clusterOf600(t *testing.T) *cluster {
	c := newCluster(t)
	cpu := map[string]float64{}
	for i := range 600 {
		name := fmt.Sprintf("p%03d", i)
		c.addPod("ns-a", name)
		cpu["ns-a/"+name] = 0.1
	}
	c.cycle(nil, cpu)
	return c
}

// buildsSoFar is how many builds the API has made in this test binary (metrics_ring_api_builds_total).
func buildsSoFar(t *testing.T) float64 {
	t.Helper()
	n, err := testutil.GetCounterMetricValue(buildsMade)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
