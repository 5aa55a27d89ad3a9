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

// CheckUsage compares served usage with the simulator's truth: CPU within 1 % (a rate measured over real
// time), memory exact (a gauge the simulator holds constant).
func CheckUsage(what string, got corev1.ResourceList, want kubeletsim.Usage) error {
	cpu, mem := got[corev1.ResourceCPU], got[corev1.ResourceMemory]
	if n := cpu.ScaledValue(resource.Nano); !WithinPercent(n, int64(want.CPUNanoCores), 1) {
		return fmt.Errorf("%s: CPU %dn, want %dn ±1%%", what, n, want.CPUNanoCores)
	}
	if mem.Value() != int64(want.MemoryBytes) {
		return fmt.Errorf("%s: memory %d, want %d", what, mem.Value(), want.MemoryBytes)
	}
	return nil
}

// CheckNodes checks that nodes are exactly the truth's nodes, none missing and none more, each passing check
// (CheckUsage, or a stricter one).
func CheckNodes(nodes []metricsv1beta1.NodeMetrics, truth map[string]kubeletsim.Usage,
	check func(what string, got corev1.ResourceList, want kubeletsim.Usage) error) error {
	var errs []error
	seen := map[string]bool{}
	for _, nm := range nodes {
		seen[nm.Name] = true
		want, ok := truth[nm.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("unexpected node %s", nm.Name))
			continue
		}
		errs = append(errs, check("node "+nm.Name, nm.Usage, want))
	}
	for name := range truth {
		if !seen[name] {
			errs = append(errs, fmt.Errorf("node %s missing", name))
		}
	}
	return errors.Join(errs...)
}
