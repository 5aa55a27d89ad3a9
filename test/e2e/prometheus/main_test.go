package prometheus

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	flag.Parse()
	os.Exit(framework.RunMain(m, "e2e/prometheus", setupAndRun))
}

func setupAndRun(m *testing.M, dir string) (code int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// First, so that a machine that cannot get Prometheus fails at once, loudly: these tests never skip.
	promBin, err := framework.EnsurePrometheus(os.Stderr)
	if err != nil {
		return 1, err
	}
	version, err := framework.PrometheusVersion(promBin)
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(os.Stderr, "using %s: %s\n", promBin, version)
	tools, err := framework.EnsureTools(framework.DefaultCacheDir(), os.Stderr)
	if err != nil {
		return 1, err
	}
	// Thanos too, before anything starts: its first build takes many minutes (cached after).
	if env.thanosBin, err = framework.EnsureThanos(framework.DefaultCacheDir(), os.Stderr); err != nil {
		return 1, err
	}
	sim, err := kubeletsim.New(kubeletsim.Config{Nodes: 3, PodsPerNode: 4, ContainersPerPod: 2, Namespaces: 2, Host: "127.0.0.1"})
	if err != nil {
		return 1, fmt.Errorf("creating simulator: %w", err)
	}
	if err := sim.Start(ctx); err != nil {
		return 1, fmt.Errorf("starting simulator: %w", err)
	}
	env.sim = sim
	defer sim.Stop()
	simCA := filepath.Join(dir, "kubelet-ca.crt")
	if err := os.WriteFile(simCA, sim.CACertPEM(), 0o600); err != nil {
		return 1, fmt.Errorf("writing kubelet CA: %w", err)
	}
	// Prometheus starts before the control plane: its 1m rate windows fill while kube-apiserver starts.
	var targets []framework.PrometheusTarget
	for _, n := range sim.Nodes() {
		targets = append(targets, framework.PrometheusTarget{Node: n, Address: fmt.Sprintf("%s:%d", sim.Host(), sim.Port(n))})
	}
	env.prom, err = framework.StartPrometheus(framework.PrometheusConfig{
		Binary: promBin, Dir: filepath.Join(dir, "prometheus"), CAFile: simCA, Targets: targets, Out: os.Stderr,
		// The Thanos sidecar (TestThanosQuery) needs them.
		ExternalLabels: map[string]string{"prometheus": "e2e"},
	})
	if err != nil {
		return 1, err
	}
	defer env.prom.Stop()
	defer func() {
		if code != 0 || err != nil {
			env.prom.Proc.DumpTail(os.Stderr, 40)
		}
	}()
	if err := env.prom.WaitReady(ctx, 2*time.Minute); err != nil {
		return 1, err
	}
	cp, err := framework.Start(ctx, framework.Options{Tools: tools, Dir: dir, Out: os.Stderr})
	if err != nil {
		return 1, err
	}
	env.cp = cp
	defer cp.Stop()
	defer func() {
		if code != 0 || err != nil {
			cp.DumpLogs(os.Stderr, 60)
		}
	}()
	if err := sim.Register(ctx, cp.Client); err != nil {
		return 1, fmt.Errorf("registering simulated nodes and pods: %w", err)
	}
	if env.api, err = cp.SetupMetricsAPI(ctx); err != nil {
		return 1, err
	}
	// Both sources run at once, on the same port, each behind its own Service.
	stale := "--stale-after=" + staleAfter.String()
	if env.kubelet, err = env.api.StartBackend(ctx, framework.BackendConfig{
		Service: kubeletService, IP: kubeletIP, Resolution: resolution, Args: append(framework.KubeletSourceArgs(simCA), stale),
	}); err != nil {
		return 1, err
	}
	// The Prometheus source runs on its defaults (no --prometheus-config): they must be right for a Prometheus
	// that scrapes /metrics/cadvisor too.
	if env.prometheus, err = env.api.StartBackend(ctx, framework.BackendConfig{
		Service: prometheusService, IP: prometheusIP, Resolution: resolution,
		Args: []string{"--source=prometheus", "--prometheus-url=" + env.prom.URL,
			"--prometheus-query-timeout=" + queryTimeout.String(), stale},
	}); err != nil {
		return 1, err
	}
	for _, b := range []*framework.Backend{env.kubelet, env.prometheus} {
		if err := b.WaitReady(ctx, 2*time.Minute); err != nil {
			return 1, err
		}
	}
	if err := env.api.PointAPIService(ctx, kubeletService); err != nil {
		return 1, err
	}
	if err := env.api.WaitAvailable(ctx, env.kubelet, 3*time.Minute); err != nil {
		return 1, err
	}
	if env.metrics, err = metricsclient.NewForConfig(cp.Config); err != nil {
		return 1, fmt.Errorf("building metrics client: %w", err)
	}
	return m.Run(), nil
}

// kubectl runs the built kubectl as the admin and returns its combined output. Every call is bounded.
func kubectl(ctx context.Context, args ...string) (string, error) {
	stdout, stderr, err := kubectlStreams(ctx, args...)
	return stdout + stderr, err
}

// kubectlStreams runs kubectl as the admin and returns what it wrote to stdout and to stderr.
func kubectlStreams(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var o, e strings.Builder
	cmd := exec.CommandContext(ctx, env.cp.Tools.Kubectl, append([]string{"--kubeconfig=" + env.cp.AdminKubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		return o.String(), e.String(), fmt.Errorf("kubectl %s: %w: %s%s", strings.Join(args, " "), err, o.String(), e.String())
	}
	return o.String(), e.String(), nil
}

// eventually polls cond every half resolution for at most timeout and fails the test with cond's last
// complaint if it never holds. How long it waited is logged (-v), to tell where a slow run spends its time.
func eventually(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	start := time.Now()
	defer func() {
		t.Helper()
		t.Logf("waited %s for %s", time.Since(start).Round(time.Millisecond), what)
	}()
	err := framework.Poll(context.Background(), what, resolution/2, timeout, func(ctx context.Context) (bool, error) {
		if err := cond(ctx); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
