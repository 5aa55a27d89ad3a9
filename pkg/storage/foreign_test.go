package storage

import (
	"strings"
	"testing"
	"time"
)

// TestWhoseSamplesCount follows DESIGN.md section 2, "Whose samples count": a pod's samples are taken only from the
// kubelet of the node it is bound to; another node's report of it is dropped and counted, and never mixes into the
// pod's series.
func TestWhoseSamplesCount(t *testing.T) {
	sec := time.Second
	// report is one batch of node key reporting pod p's app container, CPU and memory scaled by x.
	type report struct {
		key string
		x   float64
	}
	cases := []struct {
		name        string
		bound       string // the node the informer binds ns/p to; "" for none
		rebind      string // a later binding, before the last round
		reports     []report
		wantForeign int // in the last round
		wantOK      bool
		wantCPU     uint64
		wantMem     uint64
	}{
		{name: "another node reporting the pod with other values is dropped and counted",
			bound: "n1", reports: []report{{"n1", 1}, {"n2", 1000}},
			wantForeign: 1, wantOK: true, wantCPU: 100_000_000, wantMem: 1e6},
		{name: "the other node reporting first changes nothing",
			bound: "n1", reports: []report{{"n2", 1000}, {"n1", 1}},
			wantForeign: 1, wantOK: true, wantCPU: 100_000_000, wantMem: 1e6},
		{name: "only another node reporting the pod: nothing is served",
			bound: "n1", reports: []report{{"n2", 1}}, wantForeign: 1},
		{name: "a pod the informer does not know is not stored, and not foreign",
			reports: []report{{"n1", 1}}},
		{name: "a pod bound anew to another node starts afresh from that node's samples",
			bound: "n1", rebind: "n2", reports: []report{{"n1", 1}, {"n2", 2}},
			wantForeign: 1, wantOK: true, wantCPU: 200_000_000, wantMem: 2e6},
		{name: "cluster-wide batches carry no node and are not checked",
			bound: "n1", reports: []report{{"", 1}}, wantOK: true, wantCPU: 100_000_000, wantMem: 1e6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(Options{})
			if tc.bound != "" {
				f.PodBound("ns", "p", tc.bound)
			}
			var rej Rejection
			for round := range 3 { // a rebinding comes before the second; the third makes its series servable
				if round == 1 && tc.rebind != "" {
					f.PodBound("ns", "p", tc.rebind)
				}
				at := time.Duration(round) * 15 * sec
				f.clock.now = t0.Add(at)
				rej = Rejection{}
				for _, r := range tc.reports {
					b := &Batch{Key: r.key, CPU: CPUCumulative, Containers: []ContainerSample{
						ctr("p", "app", at, -time.Hour, r.x*(100+0.1*at.Seconds()), r.x*1e6)}}
					if r.key == "" {
						b.CPU, b.Window = CPURate, 15*sec
						b.Containers[0].CPU = r.x * 0.1
					}
					got := f.store(b)
					rej.Foreign += got.Foreign
					if got.ForeignPod != "" {
						rej.ForeignPod = got.ForeignPod
					}
					if got.Total() != 0 {
						t.Errorf("foreign samples counted as invalid or zero: %+v", got)
					}
				}
				f.endCycle(Outcome{Success: true})
			}
			if rej.Foreign != tc.wantForeign {
				t.Errorf("foreign = %d, want %d (%+v)", rej.Foreign, tc.wantForeign, rej)
			}
			if tc.wantForeign > 0 && !strings.Contains(rej.ForeignPod, "ns/p") {
				t.Errorf("the rejection does not name the pod: %q", rej.ForeignPod)
			}
			got, ok := f.Pod("ns", "p")
			if ok != tc.wantOK {
				t.Fatalf("servable = %v, want %v (%+v)", ok, tc.wantOK, got)
			}
			if ok && (len(got.Containers()) != 1 || got.Containers()[0].CPU != tc.wantCPU || got.Containers()[0].Memory != tc.wantMem) {
				t.Errorf("served %+v, want cpu=%d memory=%d", got.Containers(), tc.wantCPU, tc.wantMem)
			}
		})
	}
}
