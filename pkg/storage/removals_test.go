package storage

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestDeletionPublished: a deleted pod or node is left out of the newest snapshot at once (DESIGN.md section 2), not
// a cycle later; deletions within MinPublishInterval of a publication come out together, in one publication once it
// has passed, or in any publication before; snapshots published before keep their values (a page-through reading
// one may list a pod deleted since); Removals counts every removal of a served object before it is published, and
// no other (a build cannot list what nothing served: counting it would make every cached list rebuild).
func TestDeletionPublished(t *testing.T) {
	f := newFixture(Options{})
	f.bind("p", "q", "r", "never-served")
	for _, at := range []time.Duration{0, 15 * time.Second} {
		f.scrape(at, []NodeSample{node("n1", at, 1+at.Seconds(), 1e9)}, []ContainerSample{
			ctr("p", "app", at, -time.Hour, 1+at.Seconds(), 1e6),
			ctr("q", "app", at, -time.Hour, 1+at.Seconds(), 1e6),
			ctr("r", "app", at, -time.Hour, 1+at.Seconds(), 1e6)})
	}
	committed, gen, removals := f.Committed(), f.Generation(), f.Removals()
	type want struct {
		generation uint64 // how many publications since the commit
		removals   uint64 // since the commit
		served     []string
		notServed  []string
	}
	steps := []struct {
		name string
		at   time.Duration // the clock, from t0; the commit was at 15 s
		do   func()
		want want
	}{
		{"a pod deleted 2 s after the publication is published at once", 17 * time.Second,
			func() { f.PodDeleted("ns", "q") },
			want{1, 1, []string{"p", "r", "n1"}, []string{"q"}}},
		{"deletions within MinPublishInterval wait for it", 17*time.Second + MinPublishInterval/2,
			func() { f.PodDeleted("ns", "r"); f.NodeDeleted("n1") },
			want{1, 3, []string{"p", "r", "n1"}, []string{"q"}}},
		{"a pod never served is neither published nor counted", 17*time.Second + MinPublishInterval*3/4,
			func() { f.PodDeleted("ns", "never-served") },
			want{1, 3, []string{"p", "r", "n1"}, []string{"q"}}},
		{"once it has passed, they are published together", 17*time.Second + MinPublishInterval,
			func() {},
			want{2, 3, []string{"p"}, []string{"q", "r", "n1"}}},
		{"a deletion waiting", 18*time.Second + MinPublishInterval/4,
			func() { f.PodDeleted("ns", "p") },
			want{2, 4, []string{"p"}, []string{"q", "r", "n1"}}},
		{"is carried by an interim publication that comes first", 18*time.Second + MinPublishInterval*19/20,
			func() {
				c := f.BeginCycle()
				c.Append(&Batch{Key: "n2", CPU: CPUCumulative, Nodes: []NodeSample{node("n2", 18*time.Second, 1, 1e9)}})
				c.Publish()
			},
			want{3, 4, nil, []string{"p", "q", "r", "n1"}}},
		{"and its timer publishes nothing more", 18*time.Second + MinPublishInterval,
			func() {},
			want{3, 4, nil, []string{"p", "q", "r", "n1"}}},
	}
	for _, st := range steps {
		f.clock.set(t0.Add(st.at))
		st.do()
		snap := f.Latest()
		if got := snap.Generation() - gen; got != st.want.generation {
			t.Errorf("%s: %d publications since the commit, want %d", st.name, got, st.want.generation)
		}
		if got := f.Removals() - removals; got != st.want.removals {
			t.Errorf("%s: Removals grew by %d, want %d", st.name, got, st.want.removals)
		}
		for _, name := range st.want.served {
			if !serves(snap, name) {
				t.Errorf("%s: %s not served", st.name, name)
			}
		}
		for _, name := range st.want.notServed {
			if serves(snap, name) {
				t.Errorf("%s: %s still served", st.name, name)
			}
		}
	}
	for _, name := range []string{"p", "q", "r", "n1"} {
		if !serves(committed, name) {
			t.Errorf("the commit's snapshot no longer serves %s: a page-through reading it would lose it", name)
		}
	}
	removed, upTo, ok := f.RemovedAfter(removals + 1)
	wantRemoved := []Removal{{"ns", "r"}, {"", "n1"}, {"ns", "p"}}
	if !ok || upTo != removals+4 || !slices.Equal(removed, wantRemoved) {
		t.Errorf("RemovedAfter(the first removal): %v up to %d (%v), want %v up to %d", removed, upTo-removals, ok, wantRemoved, 4)
	}
}

// TestRemovedAfter: the removals counted after a count, while storage recalls them all (recentRemovals).
func TestRemovedAfter(t *testing.T) {
	var l removalLog
	for i := range recentRemovals + 10 {
		l.add(Removal{Name: strconv.Itoa(i)})
	}
	const last = recentRemovals + 10
	tests := []struct {
		after  uint64
		first  int // the first removal's name; -1 when none
		wantOK bool
	}{
		{last, -1, true},
		{last - 2, last - 2, true},
		{last - recentRemovals, last - recentRemovals, true},
		{last - recentRemovals - 1, -1, false}, // no longer recalled
		{0, -1, false},
	}
	for _, tt := range tests {
		removed, upTo, ok := l.after(tt.after)
		if ok != tt.wantOK || upTo != last {
			t.Errorf("after %d: up to %d (%v), want up to %d (%v)", tt.after, upTo, ok, last, tt.wantOK)
		}
		if !ok {
			continue
		}
		if len(removed) != int(last-tt.after) || tt.first >= 0 && removed[0].Name != strconv.Itoa(tt.first) {
			t.Errorf("after %d: %d removals from %v, want %d from %d", tt.after, len(removed), removed[:min(1, len(removed))],
				last-tt.after, tt.first)
		}
	}
}

// TestNoDeletionPublishedBeforeTheFirstCommit: nothing is served before the first commit, so nothing is published.
func TestNoDeletionPublishedBeforeTheFirstCommit(t *testing.T) {
	f := newFixture(Options{})
	f.bind("p")
	f.store(&Batch{Key: "n1", CPU: CPUCumulative, Containers: []ContainerSample{ctr("p", "app", 0, -time.Hour, 1, 1e6)}})
	gen := f.Generation()
	f.clock.set(t0.Add(time.Minute))
	f.PodDeleted("ns", "p")
	if f.Generation() != gen || len(f.clock.timers) != 0 || f.Removals() != 0 {
		t.Errorf("generation %d (want %d), %d timers, %d removals: want no publication, no removal counted", f.Generation(),
			gen, len(f.clock.timers), f.Removals())
	}
}

// serves says whether a snapshot serves the node n1 (name "n1") or the pod ns/name.
func serves(snap Snapshot, name string) bool {
	if name == "n1" {
		_, ok := snap.Node(name)
		return ok
	}
	_, ok := snap.Pod("ns", name)
	return ok
}
