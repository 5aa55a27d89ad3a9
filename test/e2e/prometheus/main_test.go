package prometheus

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

const (
	// resolution is both backends' --metric-resolution, and Prometheus scrapes every second.
	resolution = 2 * time.Second
	// staleAfter is both backends' --stale-after: short, so that the outage tests see the 503 soon, yet long
	// enough that a poll or two lost to a loaded machine never turns into one, and that the last good data is
	// seen still served once a failure shows in /metrics.
	staleAfter = 15 * time.Second
	// queryTimeout is the Prometheus source's --prometheus-query-timeout: its default (90 % of a resolution)
	// is too short for a Prometheus sharing two loaded cores with a control plane.
	queryTimeout = 5 * time.Second
)

const (
	kubeletService    = "metrics-ring-kubelet"
	kubeletIP         = "127.0.0.2"
	prometheusService = "metrics-ring-prometheus"
	prometheusIP      = "127.0.0.3"
)

// env is the shared cluster. Tests run one after another (no t.Parallel); a test that changes shared state
// (where the APIService points, whether Prometheus runs) sets what it needs first and restores what others
// rely on before it returns.
var env struct {
	cp         *framework.ControlPlane
	api        *framework.MetricsAPI
	kubelet    *framework.Backend
	prometheus *framework.Backend
	prom       *framework.Prometheus
	thanosBin  string
	sim        *kubeletsim.Sim
	metrics    metricsclient.Interface
}

func TestMain(m *testing.M) {
	// Thanos (TestThanosQuery) is built before the suite's set-up timeout starts: its first build takes minutes
	// (about 7 on two cores; cached after).
	var err error
	if env.thanosBin, err = framework.EnsureThanos(framework.DefaultCacheDir(), os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/prometheus:", err)
		os.Exit(1)
	}
	os.Exit(framework.RunSuite(m, framework.SuiteConfig{
		Name:               "e2e/prometheus",
		Timeout:            15 * time.Minute,
		Sim:                kubeletsim.Config{Nodes: 3, PodsPerNode: 4, ContainersPerPod: 2, Namespaces: 2, Host: "127.0.0.1"},
		BeforeControlPlane: startPrometheus,
		Setup:              setup,
	}))
}

// startPrometheus starts Prometheus scraping the simulated kubelets before the control plane starts, so that
// its 1m rate windows fill while kube-apiserver starts. It runs before the control-plane tools are checked,
// so that a machine that cannot get Prometheus fails soon, loudly: these tests never skip.
func startPrometheus(ctx context.Context, s *framework.Suite) error {
	promBin, err := framework.EnsurePrometheus(os.Stderr)
	if err != nil {
		return err
	}
	version, err := framework.PrometheusVersion(promBin)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "using %s: %s\n", promBin, version)
	var targets []framework.PrometheusTarget
	for _, n := range s.Sim.Nodes() {
		targets = append(targets, framework.PrometheusTarget{Node: n, Address: fmt.Sprintf("%s:%d", s.Sim.Host(), s.Sim.Port(n))})
	}
	env.prom, err = framework.StartPrometheus(framework.PrometheusConfig{
		Binary: promBin, Dir: filepath.Join(s.Dir, "prometheus"), CAFile: s.SimCA, Targets: targets, Out: os.Stderr,
		// The Thanos sidecar (TestThanosQuery) needs them.
		ExternalLabels: map[string]string{"prometheus": "e2e"},
	})
	if err != nil {
		return err
	}
	s.OnExit(func(failed bool) {
		if failed {
			env.prom.Proc.DumpTail(os.Stderr, 40)
		}
		env.prom.Stop()
	})
	return env.prom.WaitReady(ctx, 2*time.Minute)
}

// setup starts both sources at once, on the same port, each behind its own Service, and points the
// APIServices at the kubelet source.
func setup(ctx context.Context, s *framework.Suite) (err error) {
	env.cp, env.sim, env.metrics = s.CP, s.Sim, s.Metrics
	if env.api, err = env.cp.SetupMetricsAPI(ctx); err != nil {
		return err
	}
	stale := "--stale-after=" + staleAfter.String()
	if env.kubelet, err = env.api.StartBackend(ctx, framework.BackendConfig{
		Service: kubeletService, IP: kubeletIP, Resolution: resolution, Args: append(framework.KubeletSourceArgs(s.SimCA), stale),
	}); err != nil {
		return err
	}
	// The Prometheus source runs on its defaults (no --prometheus-config): they must be right for a Prometheus
	// that scrapes /metrics/cadvisor too.
	if env.prometheus, err = env.api.StartBackend(ctx, framework.BackendConfig{
		Service: prometheusService, IP: prometheusIP, Resolution: resolution,
		Args: []string{"--source=prometheus", "--prometheus-url=" + env.prom.URL,
			"--prometheus-query-timeout=" + queryTimeout.String(), stale},
	}); err != nil {
		return err
	}
	for _, b := range []*framework.Backend{env.kubelet, env.prometheus} {
		if err := b.WaitReady(ctx, 2*time.Minute); err != nil {
			return err
		}
	}
	return env.api.ServeFrom(ctx, env.kubelet, 3*time.Minute)
}
