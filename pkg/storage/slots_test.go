package storage

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// pods lists the pods a snapshot holds, sorted.
func snapshotPods(s Snapshot) []string {
	var out []string
	s.Each(nil, func(ns, name string) { out = append(out, ns+"/"+name) })
	slices.Sort(out)
	return out
}

// TestSnapshotsKeepTheirPodsAsPodsComeAndGo checks that a published snapshot answers for the pods of its own cycle
// (until they are stale) while later cycles delete pods, reuse their places for new ones and, after the cluster
// shrinks, renumber the rest.
func TestSnapshotsKeepTheirPodsAsPodsComeAndGo(t *testing.T) {
	f := newFixture(Options{})
	running := map[string]bool{} // what the pod informer holds
	names := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("p%03d", i))
		}
		return out
	}
	at := time.Duration(0)
	// cycle reports the pods (two containers each, the sidecar first) twice, so that each is servable with a CPU
	// of 1 core for p000, 2 for p001 and so on.
	cycle := func(pods []string) {
		for name := range running { // the informer's delete events
			if !slices.Contains(pods, name) {
				f.PodDeleted("ns", name)
				delete(running, name)
			}
		}
		for _, p := range pods { // and its add events
			if !running[p] {
				f.PodBound("ns", p, "n1")
				running[p] = true
			}
		}
		for range 2 {
			at += 15 * time.Second
			var cs []ContainerSample
			for i, p := range pods {
				var n int
				fmt.Sscanf(p, "p%d", &n)
				cpu := float64(n+1) * at.Seconds()
				cs = append(cs, ctr(p, "sidecar", at, -time.Hour, cpu, 1e6), ctr(p, "app", at, -time.Hour, cpu, float64(i+1)))
			}
			f.scrape(at, nil, cs)
		}
	}
	check := func(what string, s Snapshot, want []string) {
		t.Helper()
		if got := snapshotPods(s); !slices.Equal(got, want) {
			t.Fatalf("%s: snapshot holds %d pods %v, want %d", what, len(got), got, len(want))
		}
		for _, name := range want {
			var n int
			fmt.Sscanf(name, "ns/p%d", &n)
			p, ok := s.Pod("ns", name[len("ns/"):])
			if !ok || len(p.Containers()) != 2 || p.Containers()[0].Name != "app" || p.Containers()[1].Name != "sidecar" ||
				p.Containers()[0].CPU != uint64(n+1)*1e9 {
				t.Fatalf("%s: pod %s = %+v, %v; want app and sidecar at %d cores", what, name, p, ok, n+1)
			}
		}
	}
	withNS := func(pods []string) []string {
		var out []string
		for _, p := range pods {
			out = append(out, "ns/"+p)
		}
		return out
	}

	cycle(names(0, 200))
	first := f.Latest()
	check("200 pods", first, withNS(names(0, 200)))

	// Half go, new ones come: the new ones take the freed places.
	next := append(names(0, 100), names(200, 250)...)
	cycle(next)
	churned := f.Latest()
	check("after churn", churned, withNS(next))
	check("the first snapshot after churn", first, withNS(names(0, 200)))
	if _, ok := first.Pod("ns", "p210"); ok {
		t.Fatal("a pod created later is served by an older snapshot")
	}

	// The cluster shrinks to a handful of pods: more than half the places are free, so the rest are renumbered.
	few := names(240, 250)
	cycle(few)
	check("after shrinking", f.Latest(), withNS(few))
	check("the previous snapshot after shrinking", churned, withNS(next))
	if len(f.slots.pods) != len(few) || len(f.slots.free) != 0 {
		t.Errorf("after shrinking to %d pods storage has %d places, %d free; want them renumbered", len(few),
			len(f.slots.pods), len(f.slots.free))
	}
}
