package prometheus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

const (
	// warmup bounds how long the Prometheus source may take to serve the truth after Prometheus starts. The
	// default queries take rate() over [1m], and rate() extrapolates only half a scrape interval before the
	// first sample of a range: it underestimates until a whole minute of samples exists.
	warmup = 3 * time.Minute
	// settle bounds how long a swap or a restart may take to show: a few resolutions, with slack for a
	// loaded two-core machine.
	settle = time.Minute
	// cpuPct is the tolerance on CPU: a rate computed by Prometheus from samples stamped in milliseconds, and
	// by the kubelet source over its own window.
	cpuPct = 2
	// promWindow is the window the default queries' [1m] range gives; the kubelet source's is about one
	// resolution, so the window says which backend answered.
	promWindow = time.Minute
)

// snapshot is one backend's answer: usage per node and per namespace/pod/container, and every window.
type snapshot struct {
	nodes   map[string]corev1.ResourceList
	pods    map[string]map[string]corev1.ResourceList
	windows map[string]time.Duration // by "node/NAME" and "pod/NS/NAME"
}

func newSnapshot(nodes []metricsv1beta1.NodeMetrics, pods []metricsv1beta1.PodMetrics) snapshot {
	s := snapshot{nodes: map[string]corev1.ResourceList{}, pods: map[string]map[string]corev1.ResourceList{},
		windows: map[string]time.Duration{}}
	for _, n := range nodes {
		s.nodes[n.Name] = n.Usage
		s.windows["node/"+n.Name] = n.Window.Duration
	}
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		cs := map[string]corev1.ResourceList{}
		for _, c := range p.Containers {
			cs[c.Name] = c.Usage
		}
		s.pods[key] = cs
		s.windows["pod/"+key] = p.Window.Duration
	}
	return s
}

// viaAggregator reads every node's and pod's metrics through kube-apiserver with client-go through v1beta1, as
// controllers do.
func viaAggregator(ctx context.Context) (snapshot, error) { return viaAggregatorAt(ctx, "v1beta1") }

// viaAggregatorAt is viaAggregator through one version of metrics.k8s.io.
func viaAggregatorAt(ctx context.Context, version string) (snapshot, error) {
	nodes, pods, err := framework.ListMetrics(ctx, env.metrics, version)
	if err != nil {
		return snapshot{}, err
	}
	return newSnapshot(nodes, pods), nil
}

// direct reads every node's and pod's metrics from one backend, bypassing the APIService.
func direct(ctx context.Context, b *framework.Backend) (snapshot, error) {
	var nodes metricsv1beta1.NodeMetricsList
	var pods metricsv1beta1.PodMetricsList
	for path, into := range map[string]any{"/apis/metrics.k8s.io/v1beta1/nodes": &nodes, "/apis/metrics.k8s.io/v1beta1/pods": &pods} {
		code, body, err := b.Get(ctx, path)
		if err != nil {
			return snapshot{}, fmt.Errorf("%s %s: %w", b.Service, path, err)
		}
		if code != http.StatusOK {
			return snapshot{}, fmt.Errorf("%s %s: status %d: %s", b.Service, path, code, body)
		}
		if err := json.Unmarshal([]byte(body), into); err != nil {
			return snapshot{}, fmt.Errorf("%s %s: %w", b.Service, path, err)
		}
	}
	return newSnapshot(nodes.Items, pods.Items), nil
}

// tolerance is how closely a backend's answer must match the truth or another backend's: CPU within cpuPct,
// memory exact (a gauge the simulator holds constant, so every scrape and Prometheus' latest sample carry the same
// bytes), and the same swap, present in both or absent in both.
var tolerance = framework.Tolerance{CPUPercent: cpuPct, Swap: true}

// matchTruth checks that s holds exactly the simulator's nodes, pods and containers with their usage.
func matchTruth(s snapshot, truth kubeletsim.Truth) error {
	want := snapshot{nodes: map[string]corev1.ResourceList{}, pods: map[string]map[string]corev1.ResourceList{}}
	for name, u := range truth.Nodes {
		want.nodes[name] = framework.UsageList(u)
	}
	for key, cs := range truth.Pods {
		want.pods[key] = map[string]corev1.ResourceList{}
		for c, u := range cs {
			want.pods[key][c] = framework.UsageList(u)
		}
	}
	return match(s, want)
}

// match checks that got has exactly want's objects and containers, each within tolerance.
func match(got, want snapshot) error {
	var errs []error
	for name, w := range want.nodes {
		g, ok := got.nodes[name]
		if !ok {
			errs = append(errs, fmt.Errorf("node %s missing", name))
			continue
		}
		errs = append(errs, framework.CheckUsage("node "+name, g, w, tolerance))
	}
	for name := range got.nodes {
		if _, ok := want.nodes[name]; !ok {
			errs = append(errs, fmt.Errorf("unexpected node %s", name))
		}
	}
	for key, wcs := range want.pods {
		gcs, ok := got.pods[key]
		if !ok {
			errs = append(errs, fmt.Errorf("pod %s missing", key))
			continue
		}
		if len(gcs) != len(wcs) {
			errs = append(errs, fmt.Errorf("pod %s: %d containers, want %d", key, len(gcs), len(wcs)))
		}
		for c, w := range wcs {
			g, ok := gcs[c]
			if !ok {
				errs = append(errs, fmt.Errorf("pod %s: container %s missing", key, c))
				continue
			}
			errs = append(errs, framework.CheckUsage("pod "+key+" "+c, g, w, tolerance))
		}
	}
	for key := range got.pods {
		if _, ok := want.pods[key]; !ok {
			errs = append(errs, fmt.Errorf("unexpected pod %s", key))
		}
	}
	return errors.Join(errs...)
}

// servedBy says which backend produced s, from its windows: exactly promWindow for the Prometheus source,
// thanosWindow for the one reading Thanos, a few resolutions at most for the kubelet source; "" when s is empty
// or mixed.
func servedBy(s snapshot) string {
	prom, thanos, kubelet := 0, 0, 0
	for _, w := range s.windows {
		switch {
		case w == promWindow:
			prom++
		case w == thanosWindow:
			thanos++
		case w > 0 && w <= 3*resolution:
			kubelet++
		}
	}
	switch n := len(s.windows); {
	case n > 0 && prom == n:
		return prometheusService
	case n > 0 && thanos == n:
		return thanosService
	case n > 0 && kubelet == n:
		return kubeletService
	}
	return ""
}

// describeWindows summarises s's windows for failure messages.
func describeWindows(s snapshot) string {
	count := map[time.Duration]int{}
	for _, w := range s.windows {
		count[w]++
	}
	var parts []string
	for w, n := range count {
		parts = append(parts, fmt.Sprintf("%d×%s", n, w))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// checkTopCell compares a printed CPU and memory with the truth as kubectl prints it: kubectl rounds CPU up
// to whole millicores, so a value within cpuPct may print one millicore more; memory prints as whole MiB.
func checkTopCell(what, cpu, mem string, wantNano, wantBytes uint64) error {
	m, err := strconv.ParseInt(strings.TrimSuffix(cpu, "m"), 10, 64)
	if err != nil || !strings.HasSuffix(cpu, "m") {
		return fmt.Errorf("%s: CPU %q is not in millicores", what, cpu)
	}
	want := float64(wantNano) / 1e6
	if math.Abs(float64(m)-want) > max(want*cpuPct/100, 1) {
		return fmt.Errorf("%s: CPU %s, want %.3fm ±%d%%", what, cpu, want, cpuPct)
	}
	if w := fmt.Sprintf("%dMi", wantBytes>>20); mem != w {
		return fmt.Errorf("%s: memory %s, want %s", what, mem, w)
	}
	return nil
}
