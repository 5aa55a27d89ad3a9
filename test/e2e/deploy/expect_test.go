package deploy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// kubelet is how closely the kubelet source's answers must match the truth here: swap is not checked.
var kubelet = framework.Tolerance{CPUPercent: framework.KubeletCPUPercent}

// completeAndTrue checks that nodes and pods hold every simulated node, pod and container, nothing else, each
// with the truth's usage.
func completeAndTrue(nodes *metricsv1beta1.NodeMetricsList, pods *metricsv1beta1.PodMetricsList) error {
	truth := env.sim.Truth()
	errs := []error{framework.CheckNodes(nodes.Items, truth.Nodes, kubelet)}
	seen := map[string]bool{}
	for _, pm := range pods.Items {
		key := pm.Namespace + "/" + pm.Name
		seen[key] = true
		want, ok := truth.Pods[key]
		if !ok {
			errs = append(errs, fmt.Errorf("unexpected pod %s", key))
			continue
		}
		if len(pm.Containers) != len(want) {
			errs = append(errs, fmt.Errorf("pod %s: %d containers, want %d", key, len(pm.Containers), len(want)))
		}
		for _, c := range pm.Containers {
			u, ok := want[c.Name]
			if !ok {
				errs = append(errs, fmt.Errorf("pod %s: unexpected container %s", key, c.Name))
				continue
			}
			errs = append(errs, framework.CheckUsage("pod "+key+" container "+c.Name, c.Usage, framework.UsageList(u), kubelet))
		}
	}
	for key := range truth.Pods {
		if !seen[key] {
			errs = append(errs, fmt.Errorf("pod %s missing", key))
		}
	}
	return errors.Join(errs...)
}

// kubectlTopMatchesTruth runs kubectl top nodes and kubectl top pods -A as the admin through the aggregator
// and compares every row with the truth as kubectl prints it (CPU rounded to millicores, memory truncated to
// MiB).
func kubectlTopMatchesTruth(ctx context.Context) error {
	if err := env.cp.TopNodesMatchTruth(ctx, env.sim.Truth().Nodes, nil); err != nil {
		return err
	}
	return topPodsMatchTruth(ctx, "")
}

// topPodsMatchTruth checks kubectl top pods -A with kubeconfig (the admin's when empty).
func topPodsMatchTruth(ctx context.Context, kubeconfig string) error {
	wantPods := map[string]string{}
	for key, containers := range env.sim.Truth().Pods {
		cpu, mem := framework.CPUQuantity(0), framework.MemQuantity(0)
		for _, u := range containers {
			cpu.Add(framework.CPUQuantity(u.CPUNanoCores))
			mem.Add(framework.MemQuantity(u.MemoryBytes))
		}
		ns, name, _ := strings.Cut(key, "/")
		wantPods[key] = strings.Join([]string{ns, name, framework.KubectlCPU(cpu), framework.KubectlMem(mem)}, " ")
	}
	return topMatches(ctx, kubeconfig, wantPods, 2, "top", "pods", "-A", "--no-headers")
}

// topMatches runs kubectl and compares its rows, keyed by their first keyCols fields, with want.
func topMatches(ctx context.Context, kubeconfig string, want map[string]string, keyCols int, args ...string) error {
	out, err := env.cp.KubectlOutput(ctx, kubeconfig, args...)
	if err != nil {
		return err
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < keyCols {
			return fmt.Errorf("kubectl %s: unexpected row %q", strings.Join(args, " "), line)
		}
		got[strings.Join(f[:keyCols], "/")] = strings.Join(f, " ")
	}
	var diffs []string
	for k, w := range want {
		if g := got[k]; g != w {
			diffs = append(diffs, fmt.Sprintf("got %q, want %q", g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected row %q", g))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		return fmt.Errorf("kubectl %s: %s", strings.Join(args, " "), strings.Join(diffs, "; "))
	}
	return nil
}
