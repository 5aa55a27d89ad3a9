package storage

import (
	"testing"
	"time"
)

// TestSourceClockSteps follows DESIGN.md section 2's clock rules: a sample time more than --stale-after older than
// the series' newest starts the series afresh, smaller steps back are ignored, and staleness is judged on our own
// clock by when the series last received a new sample. Resolution 15 s, stale-after 45 s; each step is one scrape,
// checked right after it.
func TestSourceClockSteps(t *testing.T) {
	type step struct {
		at, ts   time.Duration // our clock and the kubelet's sample time, from t0
		cpu, mem float64
		served   bool
		wantTS   time.Duration // when served
		wantCPU  uint64
		wantMem  uint64
	}
	const hour = time.Hour
	sec := time.Second
	// Two scrapes on time: served at 200m from the second.
	first := step{at: 0, ts: 0, cpu: 100, mem: 1e9}
	second := step{at: 15 * sec, ts: 15 * sec, cpu: 103, mem: 1e9, served: true, wantTS: 15 * sec, wantCPU: 200_000_000, wantMem: 1e9}
	cases := []struct {
		name  string
		steps []step
	}{
		{name: "a kubelet an hour ahead for three scrapes, then fixed, is served at its true time within one scrape",
			steps: []step{
				{at: 0, ts: hour, cpu: 100, mem: 2e9},
				{at: 15 * sec, ts: hour + 15*sec, cpu: 101.5, mem: 2e9, served: true, wantTS: hour + 15*sec, wantCPU: 100_000_000, wantMem: 2e9},
				{at: 30 * sec, ts: hour + 30*sec, cpu: 103, mem: 2e9, served: true, wantTS: hour + 30*sec, wantCPU: 100_000_000, wantMem: 2e9},
				// Fixed: an hour older than the newest sample, so the series starts afresh; the values from the
				// future are not served any more, and one sample is not a rate yet.
				{at: 45 * sec, ts: 45 * sec, cpu: 104.5, mem: 1e9},
				{at: 60 * sec, ts: 60 * sec, cpu: 107.5, mem: 1e9, served: true, wantTS: 60 * sec, wantCPU: 200_000_000, wantMem: 1e9},
			}},
		{name: "a clock stepped back a little is ignored until it passes the newest sample",
			steps: []step{first, second,
				{at: 30 * sec, ts: 5 * sec, cpu: 104, mem: 3e9, served: true, wantTS: 15 * sec, wantCPU: 200_000_000, wantMem: 1e9},
				{at: 45 * sec, ts: 20 * sec, cpu: 104, mem: 3e9, served: true, wantTS: 20 * sec, wantCPU: 200_000_000, wantMem: 3e9},
			}},
		{name: "a clock stepped back more than stale-after starts the series afresh",
			steps: []step{first, second,
				{at: 30 * sec, ts: -time.Minute, cpu: 104, mem: 3e9},
				{at: 45 * sec, ts: -45 * sec, cpu: 105.5, mem: 3e9, served: true, wantTS: -45 * sec, wantCPU: 100_000_000, wantMem: 3e9},
			}},
		{name: "repeats of an old sample let the series go stale on our clock",
			steps: []step{first, second,
				{at: 30 * sec, ts: 15 * sec, cpu: 103, mem: 1e9, served: true, wantTS: 15 * sec, wantCPU: 200_000_000, wantMem: 1e9},
				{at: 60 * sec, ts: 15 * sec, cpu: 103, mem: 1e9, served: true, wantTS: 15 * sec, wantCPU: 200_000_000, wantMem: 1e9},
				{at: 61 * sec, ts: 15 * sec, cpu: 103, mem: 1e9},
			}},
		{name: "samples ignored for being a little old do not keep a series fresh either",
			steps: []step{first, second,
				{at: 45 * sec, ts: 10 * sec, cpu: 104, mem: 1e9, served: true, wantTS: 15 * sec, wantCPU: 200_000_000, wantMem: 1e9},
				{at: 61 * sec, ts: 12 * sec, cpu: 104, mem: 1e9},
			}},
		{name: "a kubelet an hour behind is served at its own time, fresh on ours",
			steps: []step{
				{at: 0, ts: -hour, cpu: 100, mem: 1e9},
				{at: 15 * sec, ts: -hour + 15*sec, cpu: 103, mem: 1e9, served: true, wantTS: -hour + 15*sec, wantCPU: 200_000_000, wantMem: 1e9},
				{at: 30 * sec, ts: -hour + 30*sec, cpu: 106, mem: 1e9, served: true, wantTS: -hour + 30*sec, wantCPU: 200_000_000, wantMem: 1e9},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(Options{})
			for i, s := range tc.steps {
				f.clock.now = t0.Add(s.at)
				f.store(&Batch{Key: "n1", CPU: CPUCumulative, Nodes: []NodeSample{
					{Node: "n1", Sample: Sample{Timestamp: t0.Add(s.ts), CPU: s.cpu, Memory: s.mem}}}})
				f.endCycle(Outcome{Success: true})
				got, ok := f.Node("n1")
				if ok != s.served {
					t.Fatalf("step %d (at %s, sample time %s): served = %v, want %v (%+v)", i, s.at, s.ts, ok, s.served, got)
				}
				if ok && (!got.Timestamp.Equal(t0.Add(s.wantTS)) || got.CPU != s.wantCPU || got.Memory != s.wantMem) {
					t.Errorf("step %d (at %s): served %s cpu=%d mem=%d, want %s cpu=%d mem=%d", i, s.at,
						got.Timestamp.Sub(t0), got.CPU, got.Memory, s.wantTS, s.wantCPU, s.wantMem)
				}
			}
		})
	}
}
