package realnode

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

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
// metrics-server directly, in the same run, from the same kubelet.
func startMetricsServer(ctx context.Context, cp *framework.ControlPlane, api *framework.MetricsAPI, bundle string) (*framework.Backend, metricsclient.Interface, error) {
	bin, err := framework.BuildMetricsServer(framework.DefaultCacheDir(), metricsServerVersion, os.Stderr)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics-server %s: %w", metricsServerVersion, err)
	}
	b, err := api.StartBackend(ctx, framework.BackendConfig{
		Service: metricsServerService, IP: metricsServerIP, Resolution: metricsServerResolution, Binary: bin,
		Args: append(framework.KubeletSourceArgs(bundle), "--kubelet-request-timeout=5s"),
	})
	if err != nil {
		return nil, nil, err
	}
	if err := b.WaitReady(ctx, 2*time.Minute); err != nil {
		return nil, nil, err
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Host = b.URL()
	cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.CAData = "", api.ServingCA.CertPEM
	// Its certificate names its Service, as the aggregator verifies it.
	cfg.TLSClientConfig.ServerName = metricsServerService + "." + api.Namespace + ".svc"
	c, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics client for metrics-server at %s: %w", cfg.Host, err)
	}
	return b, c, nil
}

// msPodMetrics reads a pod's metrics from metrics-server directly (v1beta1, the only version it serves). A pod
// it does not serve is (nil, NotFound).
func msPodMetrics(ctx context.Context, name string) (*metricsv1beta1.PodMetrics, error) {
	if env.ms == nil {
		return nil, fmt.Errorf("metrics-server did not start: %v", env.msErr)
	}
	m, err := env.ms.MetricsV1beta1().PodMetricses(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("metrics-server: %w", err)
	}
	return m, nil
}

// cores is a CPU quantity in cores.
func cores(q *resource.Quantity) float64 { return float64(q.ScaledValue(resource.Nano)) / 1e9 }

func toReading(ts time.Time, window time.Duration, cs []metricsv1.ContainerMetrics) reading {
	r := reading{ts: ts, window: window, cpu: map[string]float64{}, mem: map[string]int64{}, ratio: map[string]float64{}, cgroup: map[string][2]float64{}}
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
