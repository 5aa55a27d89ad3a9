package storage

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// clock is a settable time source for Storage.Now with fake timers (Options.AfterFunc), fired by set in the test's
// goroutine: storage's timers never read it from another.
type clock struct {
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func (c *clock) Now() time.Time { return c.now }

func (c *clock) afterFunc(d time.Duration, f func()) {
	c.timers = append(c.timers, fakeTimer{c.now.Add(d), f})
}

// set moves the clock to t and fires the timers due by then, in the order they were set.
func (c *clock) set(t time.Time) {
	c.now = t
	for {
		i := slices.IndexFunc(c.timers, func(ft fakeTimer) bool { return !ft.at.After(t) })
		if i < 0 {
			return
		}
		f := c.timers[i].f
		c.timers = slices.Delete(c.timers, i, i+1)
		f()
	}
}

// fixture is a Storage with a fake clock and 15 s resolution.
type fixture struct {
	*Storage
	clock *clock
}

func newFixture(o Options) *fixture {
	c := &clock{now: t0}
	o.Now, o.AfterFunc = c.Now, c.afterFunc
	if o.Resolution == 0 {
		o.Resolution = 15 * time.Second
	}
	return &fixture{New(o), c}
}

// Node, Pod, Health, Unavailable and Generation read the newest snapshot, for tests that read one value at a time.
func (f *fixture) Node(name string) (NodePoint, bool) { return f.Latest().Node(name) }
func (f *fixture) Pod(namespace, name string) (PodPoint, bool) {
	return f.Latest().Pod(namespace, name)
}
func (f *fixture) Health() Health     { return f.Latest().Health() }
func (f *fixture) Unavailable() error { return f.Latest().Unavailable() }
func (f *fixture) Generation() uint64 { return f.Latest().Generation() }

// bind tells storage that the pods ns/<name> are Running on n1, the node scrape reports, as the pod informer does.
func (f *fixture) bind(pods ...string) {
	for _, name := range pods {
		f.PodBound("ns", name, "n1")
	}
}

// scrape stores one node batch taken at the given offset from t0 (also the wall clock) and ends the cycle.
func (f *fixture) scrape(at time.Duration, nodes []NodeSample, cs []ContainerSample) Rejection {
	f.clock.now = t0.Add(at)
	rej := f.store(&Batch{Key: "n1", CPU: CPUCumulative, Nodes: nodes, Containers: cs})
	f.endCycle(Outcome{Success: true})
	return rej
}

func node(name string, at time.Duration, cpu, mem float64) NodeSample {
	return NodeSample{Node: name, Sample: Sample{Timestamp: t0.Add(at), CPU: cpu, Memory: mem}}
}

func ctr(pod, name string, at, started time.Duration, cpu, mem float64) ContainerSample {
	return ContainerSample{Namespace: "ns", Pod: pod, Container: name,
		Sample: Sample{Timestamp: t0.Add(at), StartTime: t0.Add(started), CPU: cpu, Memory: mem}}
}

func TestNodeCPUAndMemory(t *testing.T) {
	type step struct {
		at       time.Duration
		cpu, mem float64
	}
	cases := []struct {
		name       string
		steps      []step
		wantOK     bool
		wantCPU    uint64 // nanocores
		wantMem    uint64
		wantWindow time.Duration
	}{
		{name: "one sample is not servable", steps: []step{{0, 100, 1e9}}},
		{name: "two samples give the rate between them",
			steps:  []step{{0, 100, 1e9}, {15 * time.Second, 103, 2e9}},
			wantOK: true, wantCPU: 200_000_000, wantMem: 2e9, wantWindow: 15 * time.Second},
		{name: "a repeat of the newest timestamp is ignored",
			steps:  []step{{0, 100, 1e9}, {15 * time.Second, 103, 2e9}, {15 * time.Second, 999, 5e9}},
			wantOK: true, wantCPU: 200_000_000, wantMem: 2e9, wantWindow: 15 * time.Second},
		{name: "jittered spacing within window plus half a resolution still counts",
			steps:  []step{{0, 100, 1e9}, {22 * time.Second, 111, 1e9}},
			wantOK: true, wantCPU: 500_000_000, wantMem: 1e9, wantWindow: 22 * time.Second},
		{name: "a gap longer than window plus half a resolution (a missed scrape) is a rate over the gap",
			steps:  []step{{0, 100, 1e9}, {23 * time.Second, 111.5, 1e9}},
			wantOK: true, wantCPU: 500_000_000, wantMem: 1e9, wantWindow: 23 * time.Second},
		{name: "after one missed scrape the rate spans it, from the newest sample within the window when there is one",
			steps:  []step{{0, 100, 1e9}, {15 * time.Second, 101.5, 1e9}, {45 * time.Second, 107.5, 1e9}},
			wantOK: true, wantCPU: 200_000_000, wantMem: 1e9, wantWindow: 30 * time.Second},
		{name: "a gap longer than stale-after plus half a resolution is not a rate",
			steps: []step{{0, 100, 1e9}, {53 * time.Second, 111, 1e9}}},
		{name: "the oldest sample no older than window plus half a resolution is used",
			steps: []step{{0, 100, 1e9}, {10 * time.Second, 101, 1e9}, {20 * time.Second, 103, 1e9},
				{30 * time.Second, 107, 1e9}},
			wantOK: true, wantCPU: 300_000_000, wantMem: 1e9, wantWindow: 20 * time.Second},
		{name: "a counter going backwards starts the series afresh",
			steps: []step{{0, 100, 1e9}, {15 * time.Second, 103, 1e9}, {30 * time.Second, 2, 1e9}}},
		{name: "after a reset two samples are servable again",
			steps: []step{{0, 100, 1e9}, {15 * time.Second, 103, 1e9}, {30 * time.Second, 2, 1e9},
				{45 * time.Second, 2.75, 3e9}},
			wantOK: true, wantCPU: 50_000_000, wantMem: 3e9, wantWindow: 15 * time.Second},
		{name: "a sample older than the newest is ignored",
			steps:  []step{{0, 100, 1e9}, {15 * time.Second, 103, 2e9}, {10 * time.Second, 50, 7e9}},
			wantOK: true, wantCPU: 200_000_000, wantMem: 2e9, wantWindow: 15 * time.Second},
		{name: "nanocore precision is kept",
			steps:  []step{{0, 123456.789012345, 3 << 30}, {10 * time.Second, 123456.789012355, 3 << 30}},
			wantOK: true, wantCPU: 1, wantMem: 3 << 30, wantWindow: 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(Options{})
			for _, s := range tc.steps {
				f.scrape(s.at, []NodeSample{node("n1", s.at, s.cpu, s.mem)}, nil)
			}
			got, ok := f.Node("n1")
			if ok != tc.wantOK {
				t.Fatalf("servable = %v, want %v (%+v)", ok, tc.wantOK, got)
			}
			if !ok {
				return
			}
			if got.CPU != tc.wantCPU || got.Memory != tc.wantMem || got.Window != tc.wantWindow {
				t.Errorf("got cpu=%d mem=%d window=%s, want cpu=%d mem=%d window=%s",
					got.CPU, got.Memory, got.Window, tc.wantCPU, tc.wantMem, tc.wantWindow)
			}
			last := tc.steps[len(tc.steps)-1].at
			if tc.name == "a sample older than the newest is ignored" || strings.HasPrefix(tc.name, "a repeat") {
				last = 15 * time.Second
			}
			if !got.Timestamp.Equal(t0.Add(last)) {
				t.Errorf("timestamp = %s, want %s", got.Timestamp, t0.Add(last))
			}
		})
	}
}

func TestRingWrapsAtHistory(t *testing.T) {
	// With a window longer than the history, the oldest sample still in the ring bounds the rate.
	f := newFixture(Options{History: 4, Window: time.Hour})
	for i := 0; i < 10; i++ {
		at := time.Duration(i) * 15 * time.Second
		f.scrape(at, []NodeSample{node("n1", at, float64(100+i*i), 1e9)}, nil)
	}
	got, ok := f.Node("n1")
	if !ok {
		t.Fatal("not servable")
	}
	// Ring holds samples 6..9: cpu 136, 149, 164, 181 over 45 s.
	if want := uint64((181.0 - 136.0) / 45 * 1e9); got.CPU != want || got.Window != 45*time.Second {
		t.Errorf("cpu=%d window=%s, want %d over 45s", got.CPU, got.Window, want)
	}
}

func TestContainerLifecycle(t *testing.T) {
	sec := time.Second
	cases := []struct {
		name    string
		batches [][]ContainerSample
		wantOK  bool
		wantCPU map[string]uint64
	}{
		{name: "a container seen at the node's first scrape needs two samples",
			batches: [][]ContainerSample{{ctr("p", "app", 0, -5*sec, 10, 1e6)}}},
		{name: "a container started after the previous scrape counts from zero at its start",
			batches: [][]ContainerSample{
				{ctr("other", "app", 0, -time.Hour, 10, 1e6)},
				{ctr("other", "app", 15*sec, -time.Hour, 11, 1e6), ctr("p", "app", 15*sec, 5*sec, 2.5, 1e6)}},
			wantOK: true, wantCPU: map[string]uint64{"app": 250_000_000}},
		{name: "a container started under 10 s before its first sample waits for a second one, start-up left out",
			batches: [][]ContainerSample{
				{ctr("other", "app", 0, -time.Hour, 10, 1e6)},
				{ctr("other", "app", 15*sec, -time.Hour, 11, 1e6), ctr("p", "app", 15*sec, 10*sec, 2.5, 1e6)}}},
		{name: "... and is served over the scrapes' window once it has one",
			batches: [][]ContainerSample{
				{ctr("other", "app", 0, -time.Hour, 10, 1e6)},
				{ctr("other", "app", 15*sec, -time.Hour, 11, 1e6), ctr("p", "app", 15*sec, 10*sec, 2.5, 1e6)},
				{ctr("other", "app", 30*sec, -time.Hour, 12, 1e6), ctr("p", "app", 30*sec, 10*sec, 4, 1e6)}},
			wantOK: true, wantCPU: map[string]uint64{"app": 100_000_000}},
		{name: "a container the previous scrape missed, started within a resolution before it, counts from zero at its start",
			// Its pod bound just after that scrape, or the kubelet not yet reporting it: not a cycle later than others.
			batches: [][]ContainerSample{
				{ctr("other", "app", 0, -time.Hour, 10, 1e6)},
				{ctr("other", "app", 15*sec, -time.Hour, 11, 1e6)},
				{ctr("other", "app", 30*sec, -time.Hour, 12, 1e6), ctr("p", "app", 30*sec, 12*sec, 1.8, 1e6)}},
			wantOK: true, wantCPU: map[string]uint64{"app": 100_000_000}},
		{name: "a container first seen that started before the scrape before the previous one needs two samples",
			batches: [][]ContainerSample{
				{ctr("other", "app", 0, -time.Hour, 10, 1e6)},
				{ctr("other", "app", 15*sec, -time.Hour, 11, 1e6)},
				{ctr("other", "app", 30*sec, -time.Hour, 12, 1e6), ctr("p", "app", 30*sec, -sec, 3.1, 1e6)}}},
		{name: "a restart (start time moves forward) starts afresh from the new start",
			batches: [][]ContainerSample{
				{ctr("p", "app", 0, -time.Hour, 100, 1e6)},
				{ctr("p", "app", 15*sec, -time.Hour, 101, 1e6)},
				{ctr("p", "app", 30*sec, 20*sec, 1, 1e6)}},
			wantOK: true, wantCPU: map[string]uint64{"app": 100_000_000}},
		{name: "a pod with one unservable container is not served",
			batches: [][]ContainerSample{
				{ctr("p", "app", 0, -time.Hour, 100, 1e6)},
				{ctr("p", "app", 15*sec, -time.Hour, 101, 1e6), ctr("p", "sidecar", 15*sec, -time.Hour, 7, 1e6)}}},
		{name: "every container of the newest report is served, sorted by name",
			batches: [][]ContainerSample{
				{ctr("p", "sidecar", 0, -time.Hour, 50, 1e6), ctr("p", "app", 0, -time.Hour, 100, 1e6)},
				{ctr("p", "sidecar", 15*sec, -time.Hour, 51.5, 1e6), ctr("p", "app", 15*sec, -time.Hour, 103, 1e6)}},
			wantOK: true, wantCPU: map[string]uint64{"app": 200_000_000, "sidecar": 100_000_000}},
		{name: "a container missing from the newest report is dropped",
			batches: [][]ContainerSample{
				{ctr("p", "init", 0, -time.Hour, 5, 1e6), ctr("p", "app", 0, -time.Hour, 100, 1e6)},
				{ctr("p", "app", 15*sec, -time.Hour, 103, 1e6)}},
			wantOK: true, wantCPU: map[string]uint64{"app": 200_000_000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(Options{})
			f.bind("p", "other")
			for i, b := range tc.batches {
				f.scrape(time.Duration(i)*15*sec, nil, b)
			}
			got, ok := f.Pod("ns", "p")
			if ok != tc.wantOK {
				t.Fatalf("servable = %v, want %v (%+v)", ok, tc.wantOK, got)
			}
			if len(got.Containers()) != len(tc.wantCPU) {
				t.Fatalf("containers = %+v, want %v", got.Containers(), tc.wantCPU)
			}
			for i, c := range got.Containers() {
				if i > 0 && got.Containers()[i-1].Name >= c.Name {
					t.Errorf("containers not sorted: %+v", got.Containers())
				}
				if want, ok := tc.wantCPU[c.Name]; !ok || c.CPU != want {
					t.Errorf("container %s cpu = %d, want %d", c.Name, c.CPU, want)
				}
			}
		})
	}
}

func TestInvalidAndZeroSamplesAreRejected(t *testing.T) {
	nan := func() float64 { var z float64; return z / z }()
	cases := []struct {
		name              string
		cpu, mem          float64
		wantInvalid, zero int
	}{
		{"NaN cpu", nan, 1e6, 1, 0},
		{"negative memory", 10, -1, 1, 0},
		{"infinite cpu", 1 / func() float64 { return 0 }(), 1e6, 1, 0},
		{"zero counter", 0, 1e6, 0, 1},
		{"zero working set", 10, 0, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(Options{})
			f.bind("p")
			f.scrape(0, nil, []ContainerSample{ctr("p", "app", 0, -time.Hour, 1, 1e6)})
			rej := f.scrape(15*time.Second, nil, []ContainerSample{ctr("p", "app", 15*time.Second, -time.Hour, tc.cpu, tc.mem)})
			if rej.Invalid != tc.wantInvalid || rej.Zero != tc.zero || !strings.Contains(rej.Example, "ns/p/app") {
				t.Errorf("rejection = %+v, want invalid=%d zero=%d naming ns/p/app", rej, tc.wantInvalid, tc.zero)
			}
			if p, ok := f.Pod("ns", "p"); ok {
				t.Errorf("pod with a rejected newest sample served: %+v", p)
			}
		})
	}
}

func TestRateSamples(t *testing.T) {
	f := newFixture(Options{})
	f.bind("p")
	f.store(&Batch{CPU: CPURate, Window: 5 * time.Minute, Containers: []ContainerSample{
		ctr("p", "idle", 0, 0, 0, 4096), ctr("p", "busy", 0, 0, 0.123456789, 1e6)}})
	f.endCycle(Outcome{Success: true})
	got, ok := f.Pod("ns", "p")
	if !ok || len(got.Containers()) != 2 {
		t.Fatalf("rate pod not served after one sample: %+v %v", got, ok)
	}
	if got.Window != 5*time.Minute || got.Containers()[0].CPU != 123_456_789 || got.Containers()[1].CPU != 0 {
		t.Errorf("got %+v, want window 5m, busy 123456789 nanocores, idle 0", got)
	}
}

func TestStaleAfterAndMissedScrapes(t *testing.T) {
	f := newFixture(Options{})
	f.bind("p")
	f.scrape(0, []NodeSample{node("n1", 0, 100, 1e9)}, []ContainerSample{ctr("p", "app", 0, -time.Hour, 10, 1e6)})
	f.scrape(15*time.Second, []NodeSample{node("n1", 15*time.Second, 103, 1e9)},
		[]ContainerSample{ctr("p", "app", 15*time.Second, -time.Hour, 11, 1e6)})
	// Missed scrapes: cycles end with nothing stored for n1.
	for _, at := range []time.Duration{30 * time.Second, 45 * time.Second, 60 * time.Second} {
		f.clock.now = t0.Add(at)
		f.endCycle(Outcome{Success: true})
		got, ok := f.Node("n1")
		if !ok || !got.Timestamp.Equal(t0.Add(15*time.Second)) {
			t.Fatalf("at %s: node missed by a scrape should keep its last value with its true timestamp: %+v %v", at, got, ok)
		}
	}
	f.clock.now = t0.Add(61 * time.Second) // 46 s after the last report: older than stale-after (45 s)
	if got, ok := f.Node("n1"); ok {
		t.Fatalf("stale node served: %+v", got)
	}
	f.endCycle(Outcome{Success: true})
	if _, ok := f.nodes["n1"]; ok {
		t.Error("stale series not pruned from storage")
	}
	// Staleness is a rule of the data: the pod's samples go, its binding (the informer's to end) stays; and the
	// batch mark of a key silent for --stale-after goes by the same rule, whatever the key names.
	if p := f.slots.get(podKey{"ns", "p"}); p == nil || len(p.containers) != 0 {
		t.Errorf("stale pod: %+v, want still bound, without series", p)
	}
	if len(f.lastBatch) != 0 {
		t.Errorf("batch marks %v kept for a key silent for longer than stale-after", f.lastBatch)
	}
}

func TestDeletedObjectsArePruned(t *testing.T) {
	f := newFixture(Options{})
	f.PodBound("ns", "p", "n1")
	f.PodBound("ns", "q", "n1")
	batch := func(at time.Duration) []ContainerSample {
		return []ContainerSample{ctr("p", "app", at, -time.Hour, 1+at.Seconds(), 1e6), ctr("q", "app", at, -time.Hour, 1+at.Seconds(), 1e6)}
	}
	f.scrape(0, []NodeSample{node("n1", 0, 1, 1e9)}, batch(0))
	f.scrape(15*time.Second, []NodeSample{node("n1", 15*time.Second, 2, 1e9)}, batch(15*time.Second))
	if _, ok := f.Pod("ns", "q"); !ok {
		t.Fatal("pod q not served before deletion")
	}
	f.PodDeleted("ns", "q")
	f.NodeDeleted("n1")
	f.endCycle(Outcome{Success: true})
	if _, ok := f.Pod("ns", "q"); ok {
		t.Error("deleted pod still served")
	}
	if _, ok := f.Node("n1"); ok {
		t.Error("deleted node still served")
	}
	if _, ok := f.Pod("ns", "p"); !ok {
		t.Error("live pod lost when another was deleted")
	}
	if len(f.nodes) != 0 || f.slots.index.len() != 1 {
		t.Errorf("storage keeps %d nodes, %d pods; want 0, 1", len(f.nodes), f.slots.index.len())
	}
	// A kubelet goes on reporting a terminating pod for a while: that must not bring it back, nor keep a pod that
	// was never Running.
	f.scrape(30*time.Second, nil, append(batch(30*time.Second), ctr("pending", "app", 30*time.Second, -time.Hour, 1, 1e6)))
	f.scrape(45*time.Second, nil, append(batch(45*time.Second), ctr("pending", "app", 45*time.Second, -time.Hour, 2, 1e6)))
	if _, ok := f.Pod("ns", "q"); ok || f.slots.index.len() != 1 {
		t.Errorf("a deleted pod came back when its kubelet reported it again: storage keeps %d pods", f.slots.index.len())
	}
	if p, ok := f.Pod("ns", "p"); !ok || !p.Timestamp.Equal(t0.Add(45*time.Second)) {
		t.Errorf("live pod = %+v, %v after the deletion", p, ok)
	}
}

func TestHealthAndUnavailable(t *testing.T) {
	f := newFixture(Options{Source: "kubelet"})
	if f.Health().Cycles != 0 || f.Unavailable() == nil || !strings.Contains(f.Unavailable().Error(), "not finished its first collection") {
		t.Fatalf("before the first cycle: cycles=%d unavailable=%v", f.Health().Cycles, f.Unavailable())
	}
	boom := errors.New("node n1: connection refused")
	f.endCycle(Outcome{Err: boom})
	err := f.Unavailable()
	if f.Health().Cycles != 1 || err == nil || !errors.Is(err, boom) || !strings.Contains(err.Error(), "kubelet") {
		t.Fatalf("after a failed first cycle: cycles=%d unavailable=%v", f.Health().Cycles, err)
	}
	f.endCycle(Outcome{Success: true})
	if err := f.Unavailable(); err != nil || f.Generation() != uint64(t0.UnixMilli())+2 {
		t.Fatalf("after a success: unavailable=%v generation=%d", err, f.Generation())
	}
	f.clock.now = t0.Add(40 * time.Second)
	f.endCycle(Outcome{Err: boom})
	if err := f.Unavailable(); err != nil {
		t.Fatalf("a failure within stale-after of a success must still serve: %v", err)
	}
	f.clock.now = t0.Add(50 * time.Second)
	f.endCycle(Outcome{Err: boom})
	if err := f.Unavailable(); err == nil || !errors.Is(err, boom) || !strings.Contains(err.Error(), "for 50s") {
		t.Fatalf("no success within stale-after: unavailable=%v", err)
	}
	if h := f.Health(); h.Cycles != 4 || !h.LastSuccess.Equal(t0) || h.LastError != boom {
		t.Errorf("health = %+v", h)
	}
	f.clock.now = t0.Add(10 * time.Minute)
	if err := f.Unavailable(); err == nil || !strings.Contains(err.Error(), "stalled") {
		t.Errorf("a stuck collection loop: unavailable=%v", err)
	}
}

func TestSnapshotsAreConsistentAndRetained(t *testing.T) {
	f := newFixture(Options{})
	first := f.Latest()
	if first.Generation() != uint64(t0.UnixMilli()) {
		t.Fatalf("generation before any cycle = %d, want the clock in milliseconds", first.Generation())
	}
	f.scrape(0, []NodeSample{node("n1", 0, 100, 1e9)}, nil)
	select {
	case <-first.Changed():
	default:
		t.Fatal("Changed of the previous snapshot not closed when a cycle published a new one")
	}
	f.scrape(15*time.Second, []NodeSample{node("n1", 15*time.Second, 103, 1e9)}, nil)
	old := f.Latest()
	f.scrape(30*time.Second, []NodeSample{node("n1", 30*time.Second, 109, 1e9)}, nil)
	if p, _ := old.Node("n1"); p.CPU != 200_000_000 {
		t.Errorf("an older snapshot changed under its reader: %+v", p)
	}
	if p, _ := f.Latest().Node("n1"); p.CPU != 400_000_000 || f.Latest().Generation() != first.Generation()+3 {
		t.Errorf("latest = %+v at generation %d", p, f.Latest().Generation())
	}
	for gen := uint64(0); gen < 3+RetainedViews; gen++ {
		f.endCycle(Outcome{Success: true})
	}
	latest := f.Latest().Generation()
	if _, ok := f.Resolve(latest - RetainedViews + 1); !ok {
		t.Errorf("generation %d not retained (latest %d)", latest-RetainedViews+1, latest)
	}
	if _, ok := f.Resolve(latest - RetainedViews); ok {
		t.Errorf("generation %d retained beyond %d views", latest-RetainedViews, RetainedViews)
	}
	if s, ok := f.Resolve(latest); !ok || s.Generation() != latest {
		t.Errorf("Resolve(latest) = %v, %v", s, ok)
	}
}
