package kubeletsim

import (
	"strings"
	"testing"
)

// TestWorkloadSelectors checks that every workload an HPA-like client would list selects exactly WorkloadPods
// pods of its namespace, and that the workloads cover the namespaces' pods without overlap.
func TestWorkloadSelectors(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		nodes, pods, ns, size, wantN int
	}{
		{"even", 20, 30, 10, 15, 40},
		{"uneven namespaces", 7, 11, 3, 4, 18}, // 77 pods: 26, 26, 25 a namespace: 6 whole workloads each
		{"off", 2, 2, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Nodes: tc.nodes, PodsPerNode: tc.pods, Namespaces: tc.ns, WorkloadPods: tc.size}
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := Workloads(cfg); got != tc.wantN {
				t.Fatalf("Workloads = %d, want %d", got, tc.wantN)
			}
			seen := map[string]bool{}
			for i := range Workloads(cfg) {
				ns, sel := WorkloadSelector(cfg, i)
				k, v, _ := strings.Cut(sel, "=")
				n := 0
				for _, p := range s.pods {
					if p.namespace == ns && p.labels[k] == v {
						n++
						if seen[p.namespace+"/"+p.name] {
							t.Errorf("pod %s/%s is in two workloads", p.namespace, p.name)
						}
						seen[p.namespace+"/"+p.name] = true
					}
				}
				if n != tc.size {
					t.Errorf("workload %d (%s in %s) selects %d pods, want %d", i, sel, ns, n, tc.size)
				}
			}
		})
	}
}
