package storage

import (
	"errors"
	"slices"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
)

// TestInterimPublication: a cycle in progress publishes what it has appended (Cycle.Publish), at most once per
// MinPublishInterval and only when batches arrived, with the previous commit's health; Commit publishes as always.
func TestInterimPublication(t *testing.T) {
	f := newFixture(Options{})
	appendAt := func(c *Cycle, name string, at time.Duration, cpu float64) {
		c.Append(&Batch{Key: name, CPU: CPUCumulative, Nodes: []NodeSample{node(name, at, cpu, 1e9)}})
	}
	gen0 := f.Generation()

	c := f.BeginCycle()
	appendAt(c, "n1", 0, 100)
	appendAt(c, "n2", 0, 100)
	f.clock.now = t0.Add(2 * time.Second)
	c.Publish()
	if f.Generation() != gen0 {
		t.Fatal("the first cycle published before it committed: nothing is servable before it")
	}
	c.Commit(Outcome{Success: true})
	gen1 := f.Generation()
	if gen1 != gen0+1 {
		t.Fatalf("generation %d after the first commit, want %d", gen1, gen0+1)
	}

	f.clock.now = t0.Add(15 * time.Second)
	c = f.BeginCycle()
	c.Publish()
	if f.Generation() != gen1 {
		t.Error("published with no batch since the previous publication")
	}
	appendAt(c, "n1", 15*time.Second, 103) // 200m
	f.clock.now = t0.Add(16 * time.Second)
	before := observations(t)
	c.Publish()
	snap := f.Latest()
	if snap.Generation() != gen1+1 {
		t.Fatalf("generation %d after an interim publication, want %d", snap.Generation(), gen1+1)
	}
	if p, ok := snap.Node("n1"); !ok || p.CPU != 200_000_000 {
		t.Errorf("n1 in the interim snapshot: %+v %v, want its new 200m", p, ok)
	}
	if _, ok := snap.Node("n2"); ok {
		t.Error("n2 served from one sample")
	}
	if h := snap.Health(); h.Cycles != 1 || h.LastCycle != t0.Add(2*time.Second) {
		t.Errorf("interim health %+v: want the first commit's", h)
	}
	if n := observations(t) - before; n != 1 {
		t.Errorf("%d freshness observations for one new node sample", n)
	}
	appendAt(c, "n2", 15*time.Second, 101.5) // 100m
	f.clock.now = t0.Add(16*time.Second + MinPublishInterval/2)
	c.Publish()
	if f.Generation() != gen1+1 {
		t.Errorf("published %s after the previous publication, want at least %s", MinPublishInterval/2, MinPublishInterval)
	}
	before = observations(t)
	c.Commit(Outcome{Success: true, Listed: 2, Reached: 2})
	snap = f.Latest()
	if snap.Generation() != gen1+2 || snap.Health().Cycles != 2 {
		t.Errorf("commit: generation %d, %d cycles; want %d, 2 (a commit publishes however soon)", snap.Generation(),
			snap.Health().Cycles, gen1+2)
	}
	if n := observations(t) - before; n != 1 {
		t.Errorf("%d freshness observations at the commit, want 1: n1's sample was observed when first published", n)
	}
	for _, gen := range []uint64{gen0, gen1, gen1 + 1, gen1 + 2} {
		if _, ok := f.Resolve(gen); !ok {
			t.Errorf("generation %d not retained", gen)
		}
	}
}

func observations(t *testing.T) uint64 {
	t.Helper()
	n, err := testutil.GetHistogramMetricCount(freshness.ObserverMetric)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRetainedWhileHeld: a snapshot a reader holds (a page-through's lease) is retained exactly while held,
// however many publications, interim or committed, come meanwhile; released, the next publication lets it go, and
// it can no longer be held. One nobody holds goes once it is neither among the RetainedViews newest publications
// (a watch resumes from those) nor the newest commit; the views kept are those and the held ones.
func TestRetainedWhileHeld(t *testing.T) {
	f := newFixture(Options{StaleAfter: time.Hour}) // held views are retained only while published within it
	var commits, all []uint64
	held := map[uint64]*Handle{}
	for cycle := 0; cycle < 3*RetainedViews; cycle++ {
		start := time.Duration(cycle) * 15 * time.Second
		c := f.BeginCycle()
		for i := 0; i < 5; i++ { // a cycle of five seconds: an interim publication each second
			f.clock.now = t0.Add(start + time.Duration(i)*time.Second)
			c.Append(&Batch{Key: "n1", CPU: CPUCumulative, Nodes: []NodeSample{node("n1", start+time.Duration(i)*time.Second, float64(100+cycle*5+i), 1e9)}})
			before := f.Generation()
			c.Publish()
			if g := f.Generation(); g != before {
				all = append(all, g)
			}
		}
		c.Commit(Outcome{Success: true})
		commits, all = append(commits, f.Generation()), append(all, f.Generation())
		if cycle%3 == 0 { // a paged list starts from every third commit and holds it
			snap := f.Committed()
			if snap.Generation() != f.Generation() {
				t.Fatalf("Committed is generation %d, want the commit just published, %d", snap.Generation(), f.Generation())
			}
			h, ok := f.Hold(snap)
			if !ok {
				t.Fatalf("the newest commit, %d, could not be held", snap.Generation())
			}
			held[snap.Generation()] = h
		}
		if n, want := len(*f.recent.Load()), RetainedViews+1+len(held); n > want {
			t.Fatalf("%d views retained, want at most %d (the newest, the newest commit, %d held)", n, want, len(held))
		}
	}
	if len(all) <= len(commits)+RetainedViews {
		t.Fatalf("%d publications for %d commits: the interim ones did not happen", len(all), len(commits))
	}
	newest := all[len(all)-RetainedViews:]
	for _, gen := range all {
		_, ok := f.Resolve(gen)
		if snap, _ := f.Resolve(gen); snap != nil && snap.Retained() != slices.Contains(newest, gen) {
			t.Errorf("generation %d: Retained() is %v, want whether it is among the %d newest", gen, snap.Retained(), RetainedViews)
		}
		switch want := held[gen] != nil || slices.Contains(newest, gen); {
		case want && !ok:
			t.Errorf("generation %d, held or among the newest, is no longer retained", gen)
		case !want && ok:
			t.Errorf("generation %d, neither held nor among the newest, is still retained", gen)
		}
	}
	first := commits[0]
	snap, _ := f.Resolve(first)
	held[first].Release()
	// Releasing a handle twice does nothing more: another handle on the same view still retains it.
	kept, _ := f.Resolve(commits[3])
	twice, ok := f.Hold(kept)
	if !ok {
		t.Fatalf("generation %d, held, could not be held again", commits[3])
	}
	twice.Release()
	twice.Release()
	f.endCycle(Outcome{Success: true})
	if _, ok := f.Resolve(first); ok {
		t.Errorf("generation %d is still retained after its only handle was released and a publication came", first)
	}
	if _, ok := f.Hold(snap); ok {
		t.Errorf("generation %d, let go, could be held again", first)
	}
	if _, ok := f.Resolve(commits[3]); !ok {
		t.Errorf("generation %d, still held, is no longer retained", commits[3])
	}
	f.clock.now = f.clock.now.Add(time.Hour)
	if _, ok := f.Resolve(commits[3]); ok {
		t.Errorf("generation %d, held but published over --stale-after ago, is still found", commits[3])
	}
}

// TestRetainedOnItsOwnAccount: storage says which snapshots it keeps whoever holds them (Retained), so a reader
// that keeps something of a snapshot can tell what it keeps alive: the RetainedViews newest publications and the
// newest commit, however many interim publications come after it. One that leaves them is not Retained again,
// held or not.
func TestRetainedOnItsOwnAccount(t *testing.T) {
	f := newFixture(Options{StaleAfter: time.Hour})
	f.scrape(0, []NodeSample{node("n1", 0, 100, 1e9)}, nil)
	older := f.Committed()
	h, ok := f.Hold(older)
	if !ok || !older.Retained() {
		t.Fatalf("the newest commit: held %v, Retained %v; want both", ok, older.Retained())
	}
	defer h.Release()
	f.scrape(15*time.Second, []NodeSample{node("n1", 15*time.Second, 110, 1e9)}, nil)
	committed := f.Committed()
	c := f.BeginCycle()
	var interim []Snapshot
	for i := range RetainedViews + 1 { // a long cycle: an interim publication a second
		at := 30*time.Second + time.Duration(i)*time.Second
		f.clock.now = t0.Add(at)
		c.Append(&Batch{Key: "n1", CPU: CPUCumulative, Nodes: []NodeSample{node("n1", at, float64(120+i), 1e9)}})
		c.Publish()
		interim = append(interim, f.Latest())
	}
	if interim[0] == committed || interim[0] == interim[1] {
		t.Fatal("the cycle published no interim snapshots")
	}
	for i, snap := range interim {
		if want := i >= 1; snap.Retained() != want {
			t.Errorf("interim publication %d of %d: Retained %v, want %v", i+1, len(interim), snap.Retained(), want)
		}
	}
	if !committed.Retained() {
		t.Error("the newest commit is not Retained after interim publications")
	}
	if older.Retained() {
		t.Error("an older commit, held but neither among the newest nor the newest commit, is Retained")
	}
	if _, ok := f.Resolve(older.Generation()); !ok {
		t.Error("the held older commit is not found")
	}
	c.Commit(Outcome{Success: true})
	if committed.Retained() || interim[1].Retained() {
		t.Error("a snapshot that left the newest publications and commits is still Retained")
	}
}

// TestCompleteAnswer: Health.Complete is set by the first cycle after which every listed node is served, and stays.
func TestCompleteAnswer(t *testing.T) {
	f := newFixture(Options{})
	cycle := func(at time.Duration, o Outcome, nodes ...string) Health {
		f.clock.now = t0.Add(at)
		c := f.BeginCycle()
		for i, n := range nodes {
			c.Append(&Batch{Key: n, CPU: CPUCumulative, Nodes: []NodeSample{node(n, at, 100+float64(at/time.Second)+float64(i), 1e9)}})
		}
		c.Commit(o)
		return f.Health()
	}
	steps := []struct {
		at           time.Duration
		o            Outcome
		nodes        []string
		wantServable int
		wantComplete bool
	}{
		{0, Outcome{Success: true, Listed: 3, Reached: 2}, []string{"a", "b"}, 0, false}, // one sample is no rate
		{15 * time.Second, Outcome{Success: true, Listed: 3, Reached: 3}, []string{"a", "b", "c"}, 2, false},
		{30 * time.Second, Outcome{Success: true, Listed: 3, Reached: 3}, []string{"a", "b", "c"}, 3, true},
		{45 * time.Second, Outcome{Success: true, Listed: 3, Reached: 1}, []string{"a"}, 3, true}, // sticks
	}
	for i, s := range steps {
		h := cycle(s.at, s.o, s.nodes...)
		if h.Listed != s.o.Listed || h.Reached != s.o.Reached || h.Servable != s.wantServable || h.Complete.IsZero() == s.wantComplete {
			t.Errorf("cycle %d: health %+v, want %d servable, complete %v", i+1, h, s.wantServable, s.wantComplete)
		}
	}
	if h := f.Health(); !h.Complete.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("complete at %v, want the third cycle's end", h.Complete)
	}

	// A source that counts no nodes (Prometheus) is complete at its first success.
	p := newFixture(Options{Source: "prometheus"})
	p.BeginCycle().Commit(Outcome{Err: errors.New("query failed")})
	if !p.Health().Complete.IsZero() {
		t.Error("a failed cycle made the answer complete")
	}
	p.BeginCycle().Commit(Outcome{Success: true})
	if p.Health().Complete.IsZero() {
		t.Error("a successful Prometheus cycle did not make the answer complete")
	}
}

// TestInterimPublicationToleratesTickerJitter: a tick received a little later than the previous one still
// publishes, or a ticker every MinPublishInterval would publish every other tick.
func TestInterimPublicationToleratesTickerJitter(t *testing.T) {
	f := newFixture(Options{})
	f.BeginCycle().Commit(Outcome{Success: true})
	c := f.BeginCycle()
	for i, at := range []time.Duration{1010 * time.Millisecond, 2003 * time.Millisecond, 3001 * time.Millisecond} {
		f.clock.now = t0.Add(at)
		before := f.Generation()
		c.Append(&Batch{Key: "n1", CPU: CPUCumulative, Nodes: []NodeSample{node("n1", at, float64(100+i), 1e9)}})
		c.Publish()
		if f.Generation() != before+1 {
			t.Errorf("tick %d at %s: not published", i+1, at)
		}
	}
}
