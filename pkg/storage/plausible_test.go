package storage

import (
	"strings"
	"testing"
	"time"
)

// TestPlausibility follows DESIGN.md section 2, "Plausibility": no node, container or pod value above what the node
// can physically do (its capacity, with plausibleMargin) is served; it is counted and named for the log, and a
// node with no capacity known bounds nothing.
func TestPlausibility(t *testing.T) {
	sec := time.Second
	node19 := Capacity{CPU: 19, Memory: 64 << 30}
	// rates are container app's (and sidecar's, when set) CPU in cores over 15 s, mems their working sets.
	cases := []struct {
		name            string
		capacity        Capacity
		rates, mems     []float64
		nodeRate        float64 // the node's CPU in cores
		prometheus      bool    // a cluster-wide batch of rates, as the Prometheus source sends
		wantPod         bool
		wantNode        bool
		wantImplausible int
	}{
		{name: "a container's CPU above the node's is dropped", capacity: node19,
			rates: []float64{241}, mems: []float64{1e6}, nodeRate: 2, wantNode: true, wantImplausible: 1},
		{name: "a pod's containers summing above the node's CPU are dropped", capacity: node19,
			rates: []float64{11, 11}, mems: []float64{1e6, 1e6}, nodeRate: 2, wantNode: true, wantImplausible: 2},
		{name: "memory above the node's is dropped", capacity: node19,
			rates: []float64{1}, mems: []float64{71 << 30}, nodeRate: 2, wantNode: true, wantImplausible: 1},
		{name: "within the margin is served", capacity: node19,
			rates: []float64{20.5}, mems: []float64{70 << 30}, nodeRate: 20.8, wantPod: true, wantNode: true},
		{name: "a node's own CPU above its capacity is dropped", capacity: node19,
			rates: []float64{1}, mems: []float64{1e6}, nodeRate: 10017, wantPod: true, wantImplausible: 1},
		{name: "no capacity known bounds nothing",
			rates: []float64{241}, mems: []float64{1e6}, nodeRate: 300, wantPod: true, wantNode: true},
		{name: "a capacity with only memory known bounds memory only", capacity: Capacity{Memory: 1 << 30},
			rates: []float64{241}, mems: []float64{2 << 30}, nodeRate: 1, wantNode: true, wantImplausible: 1},
		{name: "the Prometheus source's rates are bounded too", capacity: node19, prometheus: true,
			rates: []float64{241}, mems: []float64{1e6}, wantImplausible: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(Options{})
			f.bind("p")
			f.NodeCapacity("n1", tc.capacity)
			var rej Rejection
			for i := range 2 {
				at := time.Duration(i) * 15 * sec
				f.clock.now = t0.Add(at)
				b := &Batch{Key: "n1", CPU: CPUCumulative}
				if tc.prometheus {
					b.Key, b.CPU, b.Window = "", CPURate, 15*sec
				} else {
					b.Nodes = []NodeSample{node("n1", at, 100+tc.nodeRate*at.Seconds(), 1e9)}
				}
				for c, rate := range tc.rates {
					cpu := 100 + rate*at.Seconds()
					if tc.prometheus {
						cpu = rate
					}
					b.Containers = append(b.Containers, ctr("p", []string{"app", "sidecar"}[c], at, -time.Hour, cpu, tc.mems[c]))
				}
				rej = f.store(b)
				f.endCycle(Outcome{Success: true})
			}
			if rej.Implausible != tc.wantImplausible {
				t.Errorf("implausible = %d, want %d (%+v)", rej.Implausible, tc.wantImplausible, rej)
			}
			if tc.wantImplausible > 0 && !strings.Contains(rej.Example, "capacity") {
				t.Errorf("the rejection does not say what was above which capacity: %q", rej.Example)
			}
			if p, ok := f.Pod("ns", "p"); ok != tc.wantPod {
				t.Errorf("pod servable = %v, want %v (%+v)", ok, tc.wantPod, p.Containers())
			}
			if n, ok := f.Node("n1"); ok != tc.wantNode && !tc.prometheus {
				t.Errorf("node servable = %v, want %v (%+v)", ok, tc.wantNode, n)
			}
		})
	}
}

// TestPlausibleAgain: a pod dropped as implausible is served again at its first plausible report, and a node's
// capacity goes with the node.
func TestPlausibleAgain(t *testing.T) {
	sec := time.Second
	f := newFixture(Options{})
	f.bind("p")
	f.NodeCapacity("n1", Capacity{CPU: 2})
	cpu := []float64{0, 1, 100, 101.5} // 0.067 cores, then 6.6 (implausible on 2 cores), then 0.1
	for i, c := range cpu {
		at := time.Duration(i) * 15 * sec
		rej := f.scrape(at, nil, []ContainerSample{ctr("p", "app", at, -time.Hour, 10+c, 1e6)})
		_, ok := f.Pod("ns", "p")
		if want := i != 0 && i != 2; ok != want || (rej.Implausible > 0) != (i == 2) {
			t.Errorf("report %d: servable = %v, want %v (%+v)", i, ok, want, rej)
		}
	}
	f.NodeDeleted("n1")
	f.scrape(60*sec, nil, []ContainerSample{ctr("p", "app", 60*sec, -time.Hour, 1000, 1e6)})
	if _, ok := f.Pod("ns", "p"); !ok {
		t.Errorf("a deleted node's capacity still bounds its pods")
	}
}
