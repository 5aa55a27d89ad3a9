package prometheus

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// TestCadvisorScrapeNotCountedTwice is the trap of DESIGN.md section 4: this Prometheus scrapes /metrics/cadvisor
// as well as /metrics/resource, so it holds two container_cpu_usage_seconds_total and two
// container_memory_working_set_bytes series per container, and a query that sums them reports twice the usage.
// The Prometheus source's defaults still report the truth, once.
func TestCadvisorScrapeNotCountedTwice(t *testing.T) {
	p := env.sim.Pods()[0]
	c := p.Containers[0]
	sel := fmt.Sprintf(`{namespace=%q,pod=%q,container=%q}`, p.Namespace, p.Name, c)
	want := env.sim.Truth().Pods[p.Namespace+"/"+p.Name][c]

	for _, metric := range []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes"} {
		framework.Eventually(t, "Prometheus to hold "+metric+" from both endpoints", settle, func(ctx context.Context) error {
			vec, err := env.prom.Query(ctx, metric+sel)
			if err != nil {
				return err
			}
			var jobs []string
			for _, s := range vec {
				jobs = append(jobs, s.Metric["job"])
			}
			slices.Sort(jobs)
			if !slices.Equal(jobs, []string{"kubelet-cadvisor", "kubelet-resource"}) {
				return fmt.Errorf("%s%s: series from jobs %v, want one from kubelet-cadvisor and one from kubelet-resource", metric, sel, jobs)
			}
			return nil
		})
	}

	// The naive query (what a config summing over the container's series does) doubles: the trap is real here.
	naive := `sum by (namespace, pod, container) (rate(container_cpu_usage_seconds_total` + sel + `[1m]))`
	framework.Eventually(t, "the naive sum to double the truth", warmup, func(ctx context.Context) error {
		v, err := single(ctx, env.prom, naive)
		if err != nil {
			return err
		}
		if !framework.WithinPercent(v*1e9, 2*float64(want.CPUNanoCores), cpuPct) {
			return fmt.Errorf("%s = %.6f cores, want twice the truth %.6f", naive, v, 2*float64(want.CPUNanoCores)/1e9)
		}
		return nil
	})

	// metrics-ring's defaults: every container and node once, read from the Prometheus backend itself.
	framework.Eventually(t, "the Prometheus source to report the truth once", warmup, func(ctx context.Context) error {
		s, err := direct(ctx, env.prometheus)
		if err != nil {
			return err
		}
		if by := servedBy(s); by != prometheusService {
			return fmt.Errorf("the Prometheus backend's windows are %s", describeWindows(s))
		}
		got := s.pods[p.Namespace+"/"+p.Name][c]
		if err := framework.CheckUsage(fmt.Sprintf("%s/%s %s", p.Namespace, p.Name, c), got, framework.UsageList(want),
			framework.Tolerance{CPUPercent: cpuPct}); err != nil {
			return err
		}
		return matchTruth(s, env.sim.Truth())
	})
}

// single runs a query that must return exactly one finite sample.
func single(ctx context.Context, p *framework.Prometheus, promql string) (float64, error) {
	vec, err := p.Query(ctx, promql)
	if err != nil {
		return 0, err
	}
	if len(vec) != 1 {
		return 0, fmt.Errorf("%s returned %d samples, want 1: %v", promql, len(vec), vec)
	}
	if v := vec[0].Value; !math.IsNaN(v) && !math.IsInf(v, 0) {
		return v, nil
	}
	return 0, fmt.Errorf("%s = %v", promql, vec[0].Value)
}
