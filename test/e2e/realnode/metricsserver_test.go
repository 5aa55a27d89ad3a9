package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

const (
	metricsServerVersion = "v0.9.0"
	metricsServerService = "metrics-server"
	metricsServerIP      = "127.0.0.3"
	// metricsServerResolution is the shortest metrics-server accepts (it refuses under 10 s, and its kubelet
	// request timeout must stay under 90 % of it: see its flags below).
	metricsServerResolution = 10 * time.Second
)

// startMetricsServer runs upstream metrics-server (built once from its module) beside metrics-ring, scraping the
// same kubelets with the same CA bundle. The APIServices keep pointing at metrics-ring: the tests read
// metrics-server directly, so that both answer in the same run, about the same kubelet samples.
func startMetricsServer(ctx context.Context, api *framework.MetricsAPI, bundle string) (*framework.Backend, error) {
	bin, err := framework.BuildMetricsServer(framework.DefaultCacheDir(), metricsServerVersion, os.Stderr)
	if err != nil {
		return nil, fmt.Errorf("metrics-server %s: %w", metricsServerVersion, err)
	}
	b, err := api.StartBackend(ctx, framework.BackendConfig{
		Service: metricsServerService, IP: metricsServerIP, Resolution: metricsServerResolution, Binary: bin,
		Args: append(framework.KubeletSourceArgs(bundle), "--kubelet-request-timeout=5s"),
	})
	if err != nil {
		return nil, err
	}
	return b, b.WaitReady(ctx, 2*time.Minute)
}

// msPodMetrics reads a pod's metrics from metrics-server directly (v1beta1, the only version it serves). A pod
// it does not serve is (nil, 404, nil).
func msPodMetrics(ctx context.Context, name string) (*metricsv1beta1.PodMetrics, int, error) {
	if env.ms == nil {
		return nil, 0, fmt.Errorf("metrics-server did not start: %v", env.msErr)
	}
	path := "/apis/metrics.k8s.io/v1beta1/namespaces/" + namespace + "/pods/" + name
	code, body, err := env.ms.Get(ctx, path)
	if err != nil {
		return nil, 0, fmt.Errorf("metrics-server GET %s: %w", path, err)
	}
	if code == http.StatusNotFound {
		return nil, code, nil
	}
	if code != http.StatusOK {
		return nil, code, fmt.Errorf("metrics-server GET %s: status %d: %.200s", path, code, body)
	}
	var m metricsv1beta1.PodMetrics
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return nil, code, fmt.Errorf("metrics-server GET %s: decoding: %w", path, err)
	}
	return &m, code, nil
}

// cores is a CPU quantity in cores.
func cores(q *resource.Quantity) float64 { return float64(q.ScaledValue(resource.Nano)) / 1e9 }

func toReading(ts time.Time, window time.Duration, cs []metricsv1.ContainerMetrics) reading {
	r := reading{ts: ts, window: window, cpu: map[string]float64{}, mem: map[string]int64{}}
	for _, c := range cs {
		r.cpu[c.Name], r.mem[c.Name] = cores(c.Usage.Cpu()), c.Usage.Memory().Value()
		r.cpu[podTotal] += r.cpu[c.Name]
		r.mem[podTotal] += r.mem[c.Name]
	}
	return r
}

func toReadingBeta(m *metricsv1beta1.PodMetrics) reading {
	cs := make([]metricsv1.ContainerMetrics, len(m.Containers))
	for i, c := range m.Containers {
		cs[i] = metricsv1.ContainerMetrics{Name: c.Name, Usage: c.Usage}
	}
	return toReading(m.Timestamp.Time, m.Window.Duration, cs)
}
