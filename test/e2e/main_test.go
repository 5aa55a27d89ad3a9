package e2e

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

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// resolution is metrics-ring's --metric-resolution in these tests: short, so changes show up quickly.
const resolution = 2 * time.Second

// env is the shared cluster every test uses. Tests run one after another (no t.Parallel): some change
// cluster-wide state (a node, the backend process) and restore it before they return.
var env struct {
	cp      *framework.ControlPlane
	api     *framework.MetricsAPI
	kubelet *framework.Backend
	sim     *kubeletsim.Sim
	simCA   string
	metrics metricsclient.Interface
}

const (
	kubeletService = "metrics-ring-kubelet"
	kubeletIP      = "127.0.0.2"
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(framework.RunMain(m, "e2e", setupAndRun))
}

func setupAndRun(m *testing.M, dir string) (code int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	tools, err := framework.EnsureTools(framework.DefaultCacheDir(), os.Stderr)
	if err != nil {
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
	sim, err := kubeletsim.New(kubeletsim.Config{Nodes: 3, PodsPerNode: 4, ContainersPerPod: 2, Namespaces: 2, Host: "127.0.0.1"})
	if err != nil {
		return 1, fmt.Errorf("creating simulator: %w", err)
	}
	if err := sim.Start(ctx); err != nil {
		return 1, fmt.Errorf("starting simulator: %w", err)
	}
	env.sim = sim
	defer sim.Stop()
	if err := sim.Register(ctx, cp.Client); err != nil {
		return 1, fmt.Errorf("registering simulated nodes and pods: %w", err)
	}
	env.simCA = filepath.Join(dir, "kubelet-ca.crt")
	if err := os.WriteFile(env.simCA, sim.CACertPEM(), 0o600); err != nil {
		return 1, fmt.Errorf("writing kubelet CA: %w", err)
	}
	if env.api, err = cp.SetupMetricsAPI(ctx); err != nil {
		return 1, err
	}
	env.kubelet, err = env.api.StartBackend(ctx, framework.BackendConfig{
		Service: kubeletService, IP: kubeletIP, Resolution: resolution,
		Args: framework.KubeletSourceArgs(env.simCA),
	})
	if err != nil {
		return 1, err
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

// kubectl runs the built kubectl with the given kubeconfig (admin when empty) and returns its combined
// output. Every call is bounded.
func kubectl(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	if kubeconfig == "" {
		kubeconfig = env.cp.AdminKubeconfig
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.cp.Tools.Kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// eventually polls cond every half resolution for at most timeout and fails the test with cond's last
// complaint if it never holds.
func eventually(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	eventuallyEvery(t, what, resolution/2, timeout, cond)
}

// eventuallyEvery is eventually with its own polling interval.
func eventuallyEvery(t *testing.T, what string, interval, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	err := framework.Poll(context.Background(), what, interval, timeout, func(ctx context.Context) (bool, error) {
		if err := cond(ctx); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
