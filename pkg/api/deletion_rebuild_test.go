package api

import (
	"context"
	"fmt"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
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

// TestRemovalRebuildsOnlyBuildsHoldingIt (a review's finding): a deletion of a served pod made every cached build of
// the newest snapshot be made anew until storage published the deletion (at most MinPublishInterval), though most
// selections never held the pod. Five deletions in ns-b leave ns-a's list of 600 pods shared (one build), while
// ns-b's and every namespace's lists, which held each deleted pod, are made anew and never serve it.
func TestRemovalRebuildsOnlyBuildsHoldingIt(t *testing.T) {
	c := clusterOf600(t)
	cpu := map[string]float64{}
	for i := range 10 {
		name := fmt.Sprintf("b%d", i)
		c.addPod("ns-b", name)
		cpu["ns-b/"+name] = 0.1
	}
	c.cycle(nil, cpu)
	s := c.podStorage()
	registerMetrics()
	// list is the list as served: a shared one is the same object for every request.
	list := func(ns string) runtime.Object {
		t.Helper()
		obj, err := s.List(genericapirequest.WithNamespace(context.Background(), ns), &metainternalversion.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	nsA := list("ns-a")
	if len(podList(t, nsA).Items) != 600 || list("ns-a") != nsA {
		t.Fatal("two lists of ns-a's 600 pods in one snapshot were not one shared list: the test no longer checks the rebuilds")
	}
	list("ns-b")
	list("")
	gen, removals, before := c.store.Latest().Generation(), c.store.Removals(), buildsSoFar(t)
	for i := range 5 {
		name := fmt.Sprintf("b%d", i)
		_ = c.pods.Delete(podMeta("ns-b", name, nil))
		c.store.PodDeleted("ns-b", name)
		if l := list("ns-a"); l != nsA {
			t.Errorf("deletion %d of ns-b/%s: ns-a's list was made anew", i+1, name)
		}
		for _, ns := range []string{"ns-b", ""} {
			for _, p := range podList(t, list(ns)).Items {
				if p.Namespace == "ns-b" && p.Name <= name {
					t.Errorf("deletion %d: the list of namespace %q serves ns-b/%s, deleted", i+1, ns, p.Name)
				}
			}
		}
	}
	if g, r := c.store.Latest().Generation(), c.store.Removals(); g != gen || r != removals+5 {
		t.Fatalf("generation %d to %d, %d removals counted of 5: the test no longer checks one snapshot's builds",
			gen, g, r-removals)
	}
	if n := buildsSoFar(t) - before; n != 10 {
		t.Errorf("5 deletions in ns-b made %v builds, want 10 (ns-b's and every namespace's, each deletion; ns-a's none)", n)
	}
}
