package e2e

import (
	"context"
	"os"
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
	os.Exit(framework.RunSuite(m, framework.SuiteConfig{
		Name:    "e2e",
		Timeout: 15 * time.Minute,
		Sim:     kubeletsim.Config{Nodes: 3, PodsPerNode: 4, ContainersPerPod: 2, Namespaces: 2, Host: "127.0.0.1"},
		Setup:   setup,
	}))
}

// setup starts one kubelet-source metrics-ring behind the APIServices.
func setup(ctx context.Context, s *framework.Suite) (err error) {
	env.cp, env.sim, env.simCA, env.metrics = s.CP, s.Sim, s.SimCA, s.Metrics
	if env.api, err = env.cp.SetupMetricsAPI(ctx); err != nil {
		return err
	}
	env.kubelet, err = env.api.StartBackend(ctx, framework.BackendConfig{
		Service: kubeletService, IP: kubeletIP, Resolution: resolution,
		Args: framework.KubeletSourceArgs(env.simCA),
	})
	if err != nil {
		return err
	}
	return env.api.ServeFrom(ctx, env.kubelet, 3*time.Minute)
}
