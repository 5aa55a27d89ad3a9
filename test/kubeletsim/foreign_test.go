package kubeletsim

import (
	"reflect"
	"testing"
)

// TestSetForeignReportsAnotherNodesPods: a node told to report another node's pods serves them at factor times
// their values, with its own pods and totals unchanged; the victim and the truth do not change, and factor 0 stops
// it. Both renderers.
func TestSetForeignReportsAnotherNodesPods(t *testing.T) {
	for _, fast := range []bool{false, true} {
		s := startSim(t, Config{Nodes: 2, PodsPerNode: 2, ContainersPerPod: 2, FastResource: fast})
		c := client(t, s)
		thief, victim := s.Nodes()[0], s.Nodes()[1]
		truth := s.Truth()
		if err := s.SetForeign(thief, victim, 1000); err != nil {
			t.Fatal(err)
		}
		a, b := scrapeTwice(t, s, c, thief, "/metrics/resource")
		mem := series(b["container_memory_working_set_bytes"], "namespace", "pod", "container")
		cpuA := series(a["container_cpu_usage_seconds_total"], "namespace", "pod", "container")
		cpuB := series(b["container_cpu_usage_seconds_total"], "namespace", "pod", "container")
		if len(mem) != 8 {
			t.Errorf("fast=%v: the thief reports %d containers, want its 4 and the victim's 4", fast, len(mem))
		}
		for _, p := range s.Pods() {
			factor := uint64(1)
			if p.Node == victim {
				factor = 1000
			}
			for _, name := range p.Containers {
				k := p.Namespace + "/" + p.Name + "/" + name
				u := truth.Pods[podKey(p.Namespace, p.Name)][name]
				if m, ok := mem[k]; !ok || value(m) != float64(u.MemoryBytes*factor) {
					t.Errorf("fast=%v: the thief reports %s memory %v, want %d", fast, k, m, u.MemoryBytes*factor)
				}
				if cpuA[k] == nil || cpuB[k] == nil {
					t.Errorf("fast=%v: no CPU series for %s", fast, k)
					continue
				}
				if r := rateBetween(t, cpuA[k], cpuB[k]); !within(r, float64(u.CPUNanoCores*factor), 0.01) {
					t.Errorf("fast=%v: the thief reports %s at %.0f nanocores, want %d", fast, k, r, u.CPUNanoCores*factor)
				}
			}
		}
		if got := value(b["node_memory_working_set_bytes"].GetMetric()[0]); got != float64(truth.Nodes[thief].MemoryBytes) {
			t.Errorf("fast=%v: the thief's node memory %v counts foreign pods, want %d", fast, got, truth.Nodes[thief].MemoryBytes)
		}
		if !reflect.DeepEqual(s.Truth(), truth) {
			t.Errorf("fast=%v: the truth changed", fast)
		}
		va, vb := scrapeTwice(t, s, c, victim, "/metrics/resource")
		checkNode(t, s, truth, victim, va, vb)

		if err := s.SetForeign(thief, "", 0); err != nil {
			t.Fatal(err)
		}
		a, b = scrapeTwice(t, s, c, thief, "/metrics/resource")
		checkNode(t, s, truth, thief, a, b)
		for _, bad := range [][2]string{{"nope", victim}, {thief, "nope"}, {thief, thief}} {
			if err := s.SetForeign(bad[0], bad[1], 2); err == nil {
				t.Errorf("SetForeign(%q, %q) accepted", bad[0], bad[1])
			}
		}
	}
}
