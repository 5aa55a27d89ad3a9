package kubeletsim

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestFreshStats checks what FreshStats promises: a valid response of the same series, where every container's
// lines carry a time of their own, a scrape a second later changes every container's CPU and working-set line (value
// and time), CPU is still its counter at the stamped time, and without it one time stamps every line.
func TestFreshStats(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fresh      bool
		wantTimes  int // distinct timestamps among container_cpu_usage_seconds_total lines, at least
		wantChange bool
	}{
		{"fresh", true, 10, true},
		{"default", false, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Nodes: 1, PodsPerNode: 12, ContainersPerPod: 2, Namespaces: 2, FastResource: true, FreshStats: tc.fresh})
			if err != nil {
				t.Fatal(err)
			}
			n := s.nodes[0]
			at := time.Unix(1795262400, 0)
			parse := func(d time.Duration) map[string]*model.Sample {
				timeNow = func() time.Time { return at.Add(d) }
				t.Cleanup(func() { timeNow = time.Now })
				parser := expfmt.NewTextParser(model.UTF8Validation)
				fams, err := parser.TextToMetricFamilies(bytes.NewReader(n.renderResource(nil)))
				if err != nil {
					t.Fatalf("response does not parse: %v", err)
				}
				out := map[string]*model.Sample{}
				for name, f := range fams {
					for _, m := range f.Metric {
						key := name
						for _, l := range m.Label {
							key += "," + l.GetValue()
						}
						var v float64
						switch {
						case m.Counter != nil:
							v = m.Counter.GetValue()
						case m.Gauge != nil:
							v = m.Gauge.GetValue()
						}
						out[key] = &model.Sample{Value: model.SampleValue(v), Timestamp: model.Time(m.GetTimestampMs())}
					}
				}
				return out
			}
			a, b := parse(0), parse(time.Second+7*time.Millisecond)
			if len(a) != len(b) || len(a) == 0 {
				t.Fatalf("%d series, then %d", len(a), len(b))
			}
			times := map[model.Time]bool{}
			for _, p := range n.pods {
				for _, c := range p.containers {
					cpuKey := "container_cpu_usage_seconds_total," + c.name + "," + p.namespace + "," + p.name
					memKey := "container_memory_working_set_bytes," + c.name + "," + p.namespace + "," + p.name
					times[a[cpuKey].Timestamp] = true
					if want := float64(c.cpu.at(int64(a[cpuKey].Timestamp)*1e6)) / 1e9; float64(a[cpuKey].Value) != want {
						t.Errorf("%s: CPU %v at its time, want %v", cpuKey, a[cpuKey].Value, want)
					}
					changed := a[memKey].Value != b[memKey].Value && a[memKey].Timestamp != b[memKey].Timestamp
					if changed != tc.wantChange {
						t.Errorf("%s: %v then %v: changed %v, want %v", memKey, a[memKey], b[memKey], changed, tc.wantChange)
					}
					if m := uint64(a[memKey].Value); m < c.memory || m > c.memory+c.memory/16 {
						t.Errorf("%s: working set %d, set to %d", memKey, m, c.memory)
					}
				}
			}
			if len(times) < tc.wantTimes || (!tc.fresh && len(times) != 1) {
				t.Errorf("%d distinct container times, want at least %d", len(times), tc.wantTimes)
			}
		})
	}
}
