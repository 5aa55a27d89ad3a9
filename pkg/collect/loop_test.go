package collect

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// fakeSource appends one node sample per cycle and reports a fixed outcome; it records the deadlines it was given
// and how many of its cycles ran at once.
type fakeSource struct {
	budget  time.Duration
	outcome storage.Outcome
	sleep   time.Duration

	mu        sync.Mutex
	deadlines []time.Time
	cycles    int
	inFlight  atomic.Int32
	overlaps  atomic.Int32
}

func (f *fakeSource) Budget() time.Duration { return f.budget }

func (f *fakeSource) Collect(ctx context.Context, add storage.AppendFunc) storage.Outcome {
	if f.inFlight.Add(1) > 1 {
		f.overlaps.Add(1)
	}
	defer f.inFlight.Add(-1)
	time.Sleep(f.sleep)
	d, _ := ctx.Deadline()
	f.mu.Lock()
	f.deadlines = append(f.deadlines, d)
	f.cycles++
	n := f.cycles
	f.mu.Unlock()
	add(&storage.Batch{CPU: storage.CPURate, Window: time.Minute, Nodes: []storage.NodeSample{{Node: "n1",
		Sample: storage.Sample{Timestamp: time.Now(), CPU: float64(n), Memory: 1 << 30}}}})
	return f.outcome
}

// Retry makes fakeSource a Warmer; it collects as Collect does.
func (f *fakeSource) Retry(ctx context.Context, add storage.AppendFunc) storage.Outcome {
	return f.Collect(ctx, add)
}

func (f *fakeSource) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cycles
}

func TestCycleCommitsTheSourceOutcome(t *testing.T) {
	boom := errors.New("node n2: connection refused")
	for _, tc := range []struct {
		name    string
		outcome storage.Outcome
	}{
		{"clean", storage.Outcome{Success: true}},
		{"partial: a success with an error", storage.Outcome{Success: true, Err: boom}},
		{"failed", storage.Outcome{Err: boom}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := storage.New(storage.Options{Source: "kubelet"})
			src := &fakeSource{budget: 3 * time.Second, outcome: tc.outcome}
			l, err := New(src, store, Options{Source: "test", Resolution: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			l.cycle(context.Background())
			after := time.Now()

			snap := store.Latest()
			h := snap.Health()
			if h.Cycles != 1 || h.LastError != tc.outcome.Err || h.LastSuccess.IsZero() == tc.outcome.Success {
				t.Errorf("health %+v after a cycle reporting %+v", h, tc.outcome)
			}
			if p, ok := snap.Node("n1"); !ok || p.CPU != 1e9 {
				t.Errorf("the appended sample is not served: %+v %v", p, ok)
			}
			if d := src.deadlines[0]; d.Before(before.Add(src.budget)) || d.After(after.Add(src.budget)) {
				t.Errorf("deadline %v: want the source's budget (%v) from the cycle's start", d.Sub(before), src.budget)
			}
		})
	}
}

func TestCycleObservesItsDuration(t *testing.T) {
	l, err := New(&fakeSource{budget: time.Second}, storage.New(storage.Options{}), Options{Source: "test_duration", Resolution: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// The histogram is the process' (one per source name): it outlives the test when run with -count.
	before, err := testutil.GetHistogramMetricCount(l.duration.ObserverMetric)
	if err != nil {
		t.Fatal(err)
	}
	l.cycle(context.Background())
	if n, err := testutil.GetHistogramMetricCount(l.duration.ObserverMetric); err != nil || n != before+1 {
		t.Errorf("metrics_ring_test_duration_collection_duration_seconds count %d -> %d, %v: want one more", before, n, err)
	}
	if again := durationOf("test_duration"); again != l.duration {
		t.Error("a second loop of the same source registered a second histogram")
	}
}

// TestRunCollectsAtOnce: the first cycle runs when Run starts, not one resolution later.
func TestRunCollectsAtOnce(t *testing.T) {
	store := storage.New(storage.Options{})
	src := &fakeSource{budget: time.Second, outcome: storage.Outcome{Success: true}}
	l, err := New(src, store, Options{Source: "test", Resolution: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// The view before Run starts: taken after, it may already be the first cycle's, which nothing changes for
	// an hour.
	before := store.Latest()
	go func() { l.Run(ctx); close(done) }()
	select {
	case <-before.Changed():
	case <-time.After(20 * time.Second): // a bound, not an assertion
		t.Fatal("no cycle committed at start")
	}
	cancel()
	<-done
	if n := src.count(); n != 1 {
		t.Errorf("%d cycles within the first hour-long resolution, want 1", n)
	}
}

// TestRunNeverOverlaps: cycles longer than the resolution delay the next one; none run at once, and none after Run
// returned.
func TestRunNeverOverlaps(t *testing.T) {
	store := storage.New(storage.Options{})
	src := &fakeSource{budget: time.Second, sleep: 5 * time.Millisecond, outcome: storage.Outcome{Success: true}}
	l, err := New(src, store, Options{Source: "test", Resolution: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	for deadline := time.Now().Add(20 * time.Second); src.count() < 5 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	n := src.count()
	if n < 5 || src.overlaps.Load() != 0 {
		t.Fatalf("%d cycles, %d of them overlapping another: want at least 5, none overlapping", n, src.overlaps.Load())
	}
	if h := store.Latest().Health(); h.Cycles != uint64(n) {
		t.Errorf("storage committed %d cycles, the source ran %d", h.Cycles, n)
	}
	time.Sleep(10 * time.Millisecond)
	if src.count() != n {
		t.Error("a cycle ran after Run returned")
	}
}

func TestNewRejects(t *testing.T) {
	store, src := storage.New(storage.Options{}), &fakeSource{}
	for _, tc := range []struct {
		name string
		src  Source
		o    Options
		want string
	}{
		{"no source", nil, Options{Source: "kubelet", Resolution: time.Second}, "a source and a storage are required"},
		{"no resolution", src, Options{Source: "kubelet"}, "must be positive"},
		{"a source name that cannot be in a metric name", src, Options{Source: "Kube-let", Resolution: time.Second}, "source name"},
	} {
		if _, err := New(tc.src, store, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// publishingSource appends one node sample, then waits (bounded) until storage publishes it before it returns: a
// cycle's batches are servable before the cycle ends.
type publishingSource struct {
	store *storage.Storage
	seen  []storage.Health // the health of each snapshot that published the cycle's sample before Commit
	cpu   float64
}

func (p *publishingSource) Budget() time.Duration { return 30 * time.Second }

func (p *publishingSource) Collect(ctx context.Context, add storage.AppendFunc) storage.Outcome {
	p.cpu += 15
	before := p.store.Latest()
	add(&storage.Batch{Key: "n1", CPU: storage.CPUCumulative, Nodes: []storage.NodeSample{{Node: "n1",
		Sample: storage.Sample{Timestamp: time.Now(), CPU: p.cpu, Memory: 1 << 30}}}})
	select {
	case <-before.Changed():
		p.seen = append(p.seen, p.store.Latest().Health())
	case <-time.After(5 * time.Second): // the first cycle publishes only at Commit
	case <-ctx.Done():
	}
	return storage.Outcome{Success: true, Listed: 1, Reached: 1}
}

func TestCyclePublishesBeforeItCommits(t *testing.T) {
	// Fake time (testing/synctest): publication every 10 ms, bounded by storage, and the source's 5 s wait are
	// exact whatever the machine's load.
	synctest.Test(t, func(t *testing.T) {
		store := storage.New(storage.Options{Source: "kubelet"})
		src := &publishingSource{store: store}
		l, err := New(src, store, Options{Source: "test", Resolution: time.Hour, PublishEvery: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		l.cycle(context.Background())
		if len(src.seen) != 0 {
			t.Fatalf("the first cycle published before its commit: %+v", src.seen)
		}
		l.cycle(context.Background())
		if len(src.seen) != 1 || src.seen[0].Cycles != 1 {
			t.Fatalf("the second cycle's sample was published before its commit %d times, with health %+v: want once, "+
				"with the first cycle's", len(src.seen), src.seen)
		}
		if h := store.Latest().Health(); h.Cycles != 2 {
			t.Errorf("%d cycles committed, want 2", h.Cycles)
		}
	})
}

// kubeletSource reports node n1, pod ns/p (bound to n1) and pod ns/q (bound to n2 by the time it is judged), with
// cumulative CPU: 10 core-seconds more every collection, stats 10 s apart, as a kubelet would.
type kubeletSource struct {
	base      time.Time
	n         int
	deadlines []time.Time // of each collection's context
}

func (k *kubeletSource) Budget() time.Duration { return time.Minute }

// Retry makes kubeletSource a Warmer; it collects as Collect does.
func (k *kubeletSource) Retry(ctx context.Context, add storage.AppendFunc) storage.Outcome {
	return k.Collect(ctx, add)
}

func (k *kubeletSource) Collect(ctx context.Context, add storage.AppendFunc) storage.Outcome {
	d, _ := ctx.Deadline()
	k.deadlines = append(k.deadlines, d)
	k.n++
	at := k.base.Add(time.Duration(k.n) * 10 * time.Second)
	smp := storage.Sample{Timestamp: at, CPU: float64(10 * k.n), Memory: 1 << 20}
	b := &storage.Batch{Key: "n1", CPU: storage.CPUCumulative, Nodes: []storage.NodeSample{{Node: "n1", Sample: smp}},
		Containers: []storage.ContainerSample{{Namespace: "ns", Pod: "p", Container: "c", Sample: smp},
			{Namespace: "ns", Pod: "q", Container: "c", Sample: smp}}}
	add(b)
	b.Nodes[0].CPU, b.Containers[0].CPU = -1, -1 // a source reuses its batch once add returns
	return storage.Outcome{Success: true, Listed: 1, Reached: 1}
}

// TestWarmSamplesCountFromTheFirstCycle: the warm-up before the first cycle collects once within the source's
// budget; what it collected is neither stored nor published then, nor counted as a cycle (readiness and the 503
// still wait for the first real one), but the first cycle appends it before its own, judged by whose pod is whose
// as known by then: the first cycle serves a CPU rate over both samples, a resolution sooner than without, and a
// pod bound elsewhere meanwhile gets nothing from it. A warm-up less than half a resolution before the first cycle
// (a small cluster's pods listed at once) is not used: the first rate would span a fraction of the window.
func TestWarmSamplesCountFromTheFirstCycle(t *testing.T) {
	for _, tc := range []struct {
		name      string
		warmToRun time.Duration // between the warm-up and the first cycle, on the loop's clock
		served    bool
	}{
		{"the pods listed 20 s after the warm-up", 20 * time.Second, true},
		{"half a resolution after", 5 * time.Second, true},
		{"less than half a resolution after", 4 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := storage.New(storage.Options{Source: "kubelet", Resolution: 10 * time.Second})
			src := &kubeletSource{base: time.Now()}
			now := time.Now()
			clock := func() time.Time { return now }
			l, err := New(src, store, Options{Source: "test", Resolution: 10 * time.Second, Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			gen := store.Latest().Generation()
			before := time.Now()
			l.Warm(context.Background())
			if src.n != 1 {
				t.Fatalf("the warm-up collected %d times, want once", src.n)
			}
			if d := src.deadlines[0]; d.Before(before.Add(src.Budget())) || d.After(time.Now().Add(src.Budget())) {
				t.Errorf("warm-up deadline %s: want the source's budget, %s", d.Sub(before), src.Budget())
			}
			snap := store.Latest()
			if snap.Generation() != gen || snap.Health().Cycles != 0 || snap.Unavailable() == nil {
				t.Errorf("after the warm-up: generation %d (was %d), health %+v: want nothing published",
					snap.Generation(), gen, snap.Health())
			}
			// The pods are known once the warm-up ends: p on the node that reported it, q on another.
			store.PodBound("ns", "p", "n1")
			store.PodBound("ns", "q", "n2")
			now = now.Add(tc.warmToRun)
			l.cycle(context.Background())
			snap = store.Latest()
			n, ok := snap.Node("n1")
			if ok != tc.served || ok && (n.CPU != 1e9 || n.Window != 10*time.Second) {
				t.Errorf("after the first cycle node n1 is %+v (served %v), want served %v: 1 core over the 10 s since "+
					"the warm-up's sample", n, ok, tc.served)
			}
			if p, ok := snap.Pod("ns", "p"); ok != tc.served || ok && (len(p.Usages) != 1 || p.Usages[0].CPU != 1e9) {
				t.Errorf("after the first cycle pod ns/p is %+v (served %v), want served %v: 1 core", p, ok, tc.served)
			}
			if p, ok := snap.Pod("ns", "q"); ok {
				t.Errorf("pod ns/q, bound to n2, served %+v from n1's samples", p)
			}
			l.cycle(context.Background())
			if n, ok := store.Latest().Node("n1"); !ok || n.CPU != 1e9 || n.Window != 10*time.Second {
				t.Errorf("after the second cycle node n1 is %+v (served %v): want 1 core over 10 s", n, ok)
			}
		})
	}
}

// waitingSource reaches one node of two and the other never: each collection ends with its budget. retries counts
// the collections of only what was not reached (Retry).
type waitingSource struct {
	budget            time.Duration
	collects, retries atomic.Int32
}

func (w *waitingSource) Budget() time.Duration { return w.budget }

func (w *waitingSource) Collect(ctx context.Context, _ storage.AppendFunc) storage.Outcome {
	w.collects.Add(1)
	<-ctx.Done()
	return storage.Outcome{Listed: 2, Reached: 1, Success: true}
}

func (w *waitingSource) Retry(ctx context.Context, _ storage.AppendFunc) storage.Outcome {
	w.retries.Add(1)
	<-ctx.Done()
	return storage.Outcome{Listed: 1, Reached: 0}
}

// TestWarmRounds: a warm-up whose budget runs out with nodes unreached goes on in rounds, of only what was not
// reached, at most maxWarmRounds, until its context ends (the pods' sync), which also ends the round under way; a
// warm-up that reached every node, or that ran out of nodes rather than time (a kubelet refusing at once), is one
// round.
func TestWarmRounds(t *testing.T) {
	warm := func(src Source, ctx context.Context) {
		l, err := New(src, storage.New(storage.Options{Source: "kubelet"}), Options{Source: "test", Resolution: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		l.Warm(ctx)
	}
	slow := &waitingSource{budget: 20 * time.Millisecond}
	warm(slow, t.Context())
	if c, r := slow.collects.Load(), slow.retries.Load(); c != 1 || r != maxWarmRounds-1 {
		t.Errorf("budgets that kept running out: %d collections and %d retries, want 1 and %d", c, r, maxWarmRounds-1)
	}
	for name, o := range map[string]storage.Outcome{
		"every node reached":     {Listed: 2, Reached: 2, Success: true},
		"a node refused at once": {Listed: 2, Reached: 1, Success: true},
	} {
		src := &fakeSource{budget: time.Minute, outcome: o}
		warm(src, t.Context())
		if n := src.count(); n != 1 {
			t.Errorf("%s within the budget: %d rounds, want 1", name, n)
		}
	}
	synced := &waitingSource{budget: time.Minute}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond) // the pods synced meanwhile
	defer cancel()
	start := time.Now()
	warm(synced, ctx)
	if d := time.Since(start); d > 10*time.Second || synced.collects.Load()+synced.retries.Load() != 1 {
		t.Errorf("a warm-up whose context ended: %d rounds in %s, want the one, ended with the context",
			synced.collects.Load()+synced.retries.Load(), d)
	}
}

// TestWarmOnlyWarmers: a source that is not a Warmer (the Prometheus source) is not collected before the first
// cycle: a poll thrown away would cost Prometheus a whole query for nothing.
func TestWarmOnlyWarmers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		warmer bool
		polls  int
	}{
		{"a Warmer is warmed", true, 1},
		{"a plain Source is not", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{budget: time.Minute}
			var as Source = src
			if !tc.warmer {
				as = struct{ Source }{src} // hides Retry
			}
			l, err := New(as, storage.New(storage.Options{Source: "prometheus"}), Options{Source: "test",
				Resolution: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			l.Warm(t.Context())
			if n := src.count(); n != tc.polls {
				t.Errorf("%d collections before the first cycle, want %d", n, tc.polls)
			}
		})
	}
}

// startSource's first Collect is the warm-up's: it says so and waits for its context; later ones are cycles.
type startSource struct {
	warming chan struct{} // closed when the warm-up's collection began
	ended   chan error    // the warm-up context's error once it ended
	cycles  chan struct{} // a cycle's collection
	calls   atomic.Int32
	inUse   atomic.Int32
	overlap atomic.Bool
}

func (s *startSource) Budget() time.Duration { return time.Minute }

func (s *startSource) Collect(ctx context.Context, _ storage.AppendFunc) storage.Outcome {
	if s.inUse.Add(1) > 1 {
		s.overlap.Store(true)
	}
	defer s.inUse.Add(-1)
	if s.calls.Add(1) == 1 {
		close(s.warming)
		<-ctx.Done()
		s.ended <- context.Cause(ctx)
		return storage.Outcome{Listed: 1}
	}
	select {
	case s.cycles <- struct{}{}:
	default:
	}
	return storage.Outcome{Listed: 1, Reached: 1, Success: true}
}

func (s *startSource) Retry(ctx context.Context, add storage.AppendFunc) storage.Outcome {
	return s.Collect(ctx, add)
}

// TestStartWarmsUntilSynced: Start warms the source once the nodes are known and ends the warm-up when every
// informer has synced (not at the warm-up's budget, a minute here), then runs the cycles, never beside the warm-up.
func TestStartWarmsUntilSynced(t *testing.T) {
	src := &startSource{warming: make(chan struct{}), ended: make(chan error, 1), cycles: make(chan struct{}, 1)}
	l, err := New(src, storage.New(storage.Options{Source: "kubelet"}), Options{Source: "test", Resolution: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var podsSynced atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Start(ctx, func() bool { return true }, func() bool { return podsSynced.Load() })
	}()
	deadline := time.After(10 * time.Second) // bounded; each step takes milliseconds
	select {
	case <-src.warming:
	case <-deadline:
		t.Fatal("no warm-up once the nodes were known")
	}
	select {
	case <-src.cycles:
		t.Fatal("a cycle ran before the informers synced")
	case <-time.After(50 * time.Millisecond):
	}
	podsSynced.Store(true)
	select {
	case err := <-src.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the warm-up ended with %v, want cancelled at the sync", err)
		}
	case <-deadline:
		t.Fatal("the warm-up did not end at the sync")
	}
	select {
	case <-src.cycles:
	case <-deadline:
		t.Fatal("no cycle after the sync")
	}
	cancel()
	<-done
	if src.overlap.Load() {
		t.Error("a cycle ran beside the warm-up")
	}
}
