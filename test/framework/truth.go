package framework

import (
	"errors"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// WithinPercent reports whether got is within pct percent of want: served CPU is a rate measured over real
// time, so the e2e tests compare it with the simulator's truth within a tolerance, never exactly.
func WithinPercent[N ~int64 | ~float64](got, want N, pct float64) bool {
	return math.Abs(float64(got)-float64(want)) <= math.Abs(float64(want))*pct/100
}

// KubeletCPUPercent is the tolerance on CPU the kubelet source is held to against the simulator's truth: a rate
// measured over real time, never exact.
const KubeletCPUPercent = 1

// Tolerance is how closely served usage must match a reference. CPU is a rate (measured over real time, or computed
// by Prometheus from samples stamped in milliseconds): within CPUPercent. Memory is a gauge the simulator holds
// constant: exact. With Swap, swap is exact too, and present exactly when the reference has it (every simulated
// kubelet reports one, 0 included).
type Tolerance struct {
	CPUPercent float64
	Swap       bool
}

// CheckUsage compares one object's served usage with want (the truth, UsageList, or another backend's answer)
// within tol, and reports every difference.
func CheckUsage(what string, got, want corev1.ResourceList, tol Tolerance) error {
	var errs []error
	cpu, wantCPU := got[corev1.ResourceCPU], want[corev1.ResourceCPU]
	if n, w := cpu.ScaledValue(resource.Nano), wantCPU.ScaledValue(resource.Nano); !WithinPercent(n, w, tol.CPUPercent) {
		errs = append(errs, fmt.Errorf("%s: CPU %dn, want %dn ±%v%%", what, n, w, tol.CPUPercent))
	}
	mem, wantMem := got[corev1.ResourceMemory], want[corev1.ResourceMemory]
	if mem.Value() != wantMem.Value() {
		errs = append(errs, fmt.Errorf("%s: memory %d, want %d", what, mem.Value(), wantMem.Value()))
	}
	if tol.Swap {
		g, gok := got["swap"]
		w, wok := want["swap"]
		if gok != wok || g.Cmp(w) != 0 {
			errs = append(errs, fmt.Errorf("%s: swap %s (present %v), want %s (present %v)", what, g.String(), gok,
				w.String(), wok))
		}
	}
	return errors.Join(errs...)
}

// UsageList is u as the metrics API serves it, swap included.
func UsageList(u kubeletsim.Usage) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    CPUQuantity(u.CPUNanoCores),
		corev1.ResourceMemory: MemQuantity(u.MemoryBytes),
		"swap":                MemQuantity(u.SwapBytes),
	}
}

// CheckNodes checks that nodes are exactly the truth's nodes, none missing and none more, each within tol
// (CheckUsage).
func CheckNodes(nodes []metricsv1beta1.NodeMetrics, truth map[string]kubeletsim.Usage, tol Tolerance) error {
	var errs []error
	seen := map[string]bool{}
	for _, nm := range nodes {
		seen[nm.Name] = true
		want, ok := truth[nm.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("unexpected node %s", nm.Name))
			continue
		}
		errs = append(errs, CheckUsage("node "+nm.Name, nm.Usage, UsageList(want), tol))
	}
	for name := range truth {
		if !seen[name] {
			errs = append(errs, fmt.Errorf("node %s missing", name))
		}
	}
	return errors.Join(errs...)
}
