package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// exact is how closely values must match the truth: CPU within framework.KubeletCPUPercent, memory exact, and swap
// exact too: every simulated kubelet reports swap, so usage.swap must be there, 0 included.
var exact = framework.Tolerance{CPUPercent: framework.KubeletCPUPercent, Swap: true}

func checkPod(pm *metricsv1beta1.PodMetrics, want map[string]kubeletsim.Usage) error {
	key := pm.Namespace + "/" + pm.Name
	if len(pm.Containers) != len(want) {
		var names []string
		for _, c := range pm.Containers {
			names = append(names, c.Name)
		}
		return fmt.Errorf("%s: containers %v, want %d", key, names, len(want))
	}
	var errs []error
	for _, c := range pm.Containers {
		u, ok := want[c.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unexpected container %s", key, c.Name))
			continue
		}
		errs = append(errs, framework.CheckUsage(key+" "+c.Name, c.Usage, framework.UsageList(u), exact))
	}
	if pm.Window.Duration <= 0 {
		errs = append(errs, fmt.Errorf("%s: window %s", key, pm.Window.Duration))
	}
	return errors.Join(errs...)
}

func podMatchesTruth(ctx context.Context, ns, name string) error {
	pm, err := env.metrics.MetricsV1beta1().PodMetricses(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return checkPod(pm, env.sim.Truth().Pods[ns+"/"+name])
}

// TestMetricsAPIValuesEqualTruth reads every node and pod through each served version with its own typed client
// (v1 as kubectl 1.37 reads it, v1beta1 as the HPA does): both equal the truth.
func TestMetricsAPIValuesEqualTruth(t *testing.T) {
	for _, v := range framework.MetricsVersions {
		t.Run(v, func(t *testing.T) { valuesEqualTruth(t, v) })
	}
}

func valuesEqualTruth(t *testing.T, version string) {
	framework.Eventually(t, "node metrics to equal the truth", settle, func(ctx context.Context) error {
		truth := env.sim.Truth()
		nodes, _, err := framework.ListMetrics(ctx, env.metrics, version)
		if err != nil {
			return err
		}
		return framework.CheckNodes(nodes, truth.Nodes, exact)
	})
	framework.Eventually(t, "pod metrics to equal the truth", settle, func(ctx context.Context) error {
		truth := env.sim.Truth()
		_, pods, err := framework.ListMetrics(ctx, env.metrics, version)
		if err != nil {
			return err
		}
		var errs []error
		var keys []string
		for i := range pods {
			pm := &pods[i]
			key := pm.Namespace + "/" + pm.Name
			keys = append(keys, key)
			want, ok := truth.Pods[key]
			if !ok {
				errs = append(errs, fmt.Errorf("unexpected pod %s", key))
				continue
			}
			errs = append(errs, checkPod(pm, want))
		}
		if len(keys) != len(truth.Pods) {
			errs = append(errs, fmt.Errorf("listed %d pods, the truth has %d", len(keys), len(truth.Pods)))
		}
		if !sort.SliceIsSorted(pods, func(i, j int) bool {
			a, b := pods[i], pods[j]
			return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
		}) {
			errs = append(errs, fmt.Errorf("list not sorted by namespace/name: %s", strings.Join(keys, " ")))
		}
		return errors.Join(errs...)
	})
	// Single-object reads answer the same values.
	p := env.sim.Pods()[0]
	framework.Eventually(t, "GET of one pod's metrics", settle, func(ctx context.Context) error {
		pm, err := framework.GetPodMetrics(ctx, env.metrics, version, p.Namespace, p.Name)
		if err != nil {
			return err
		}
		return checkPod(pm, env.sim.Truth().Pods[p.Namespace+"/"+p.Name])
	})
	framework.Eventually(t, "GET of one node's metrics", settle, func(ctx context.Context) error {
		var usage corev1.ResourceList
		if version == "v1" {
			nm, err := env.metrics.MetricsV1().NodeMetricses().Get(ctx, p.Node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			usage = nm.Usage
		} else {
			nm, err := env.metrics.MetricsV1beta1().NodeMetricses().Get(ctx, p.Node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			usage = nm.Usage
		}
		return framework.CheckUsage("node "+p.Node, usage, framework.UsageList(env.sim.Truth().Nodes[p.Node]), exact)
	})
}
