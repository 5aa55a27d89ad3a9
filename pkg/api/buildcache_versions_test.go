package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestOldVersionsKeepTheNewestBuilds (a review's finding): the build cache keeps the builds of at most
// keptGenerations (4) snapshots, the least recently used going first, and any reader chooses which snapshots it
// reads (resourceVersion with limit, or resourceVersionMatch=Exact). In a cluster with interim publications the
// retained snapshots are the 4 newest and the newest commit: 5. One reader touching the 4 it does not need, with
// lists of one pod, evicted the newest snapshot's builds between two requests of everyone else: each of 10 lists
// of 600 pods (a dashboard's `kubectl top pods`, or 10 readers sharing one) was a full build, for 4 requests of
// one pod each. The snapshots storage retains anyway (Snapshot.Retained, the newest published and committed among
// them) are never trimmed now.
func TestOldVersionsKeepTheNewestBuilds(t *testing.T) {
	c := clusterOf600(t)
	committed := c.store.Latest().Generation()
	// A long cycle: five interim publications, each of one pod's new sample.
	cy := c.store.BeginCycle()
	for i := range 5 {
		now := time.Unix(0, c.clock.Add(int64(storage.MinPublishInterval)))
		cy.Append(&storage.Batch{CPU: storage.CPURate, Window: time.Minute, Containers: []storage.ContainerSample{{
			Namespace: "ns-a", Pod: fmt.Sprintf("p%03d", i), Container: "app",
			Sample: storage.Sample{Timestamp: now, CPU: 0.2, Memory: 1 << 20}}}})
		cy.Publish()
	}
	latest := c.store.Latest().Generation()
	if latest != committed+5 {
		t.Fatalf("generations %d to %d, want 5 interim publications", committed, latest)
	}
	s := c.podStorage()
	registerMetrics()
	all := context.Background()
	nsA := genericapirequest.WithNamespace(all, "ns-a")
	var onePod []string // the other retained snapshots' versions
	for _, gen := range []uint64{committed, latest - 3, latest - 2, latest - 1} {
		snap, ok := c.store.Resolve(gen)
		if !ok {
			t.Fatalf("generation %d is not retained", gen)
		}
		onePod = append(onePod, s.rv(snap))
	}
	newest := func() any {
		t.Helper()
		obj, err := s.List(all, &metainternalversion.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	first := newest()
	if newest() != first {
		t.Fatal("two lists of the newest snapshot were not shared: the test no longer checks the rebuilds")
	}
	before, rebuilt := buildsSoFar(t), 0
	for range 10 {
		for _, rv := range onePod { // one reader's small lists of older snapshots
			o := listOpts(t, "", "metadata.name=p100")
			o.ResourceVersion, o.Limit = rv, 1
			if _, err := s.List(nsA, o); err != nil {
				t.Fatal(err)
			}
		}
		if l := newest(); l != first { // everyone else's list of the newest
			rebuilt, first = rebuilt+1, l
		}
	}
	if rebuilt > 0 {
		t.Errorf("10 lists of the newest snapshot's 600 pods were built %d times anew (%v builds in all for them and 40 lists of one pod), want 0",
			rebuilt, buildsSoFar(t)-before)
	}
}
