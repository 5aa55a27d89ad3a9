package replicas

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// resolution is each replica's --metric-resolution: short, so that both serve every pod soon.
const resolution = 2 * time.Second

// service is the one Service both replicas are endpoints of.
const service = "metrics-ring"

var env struct {
	cp       *framework.ControlPlane
	sim      *kubeletsim.Sim
	metrics  metricsclient.Interface
	replicas []*framework.Backend
}

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, framework.SuiteConfig{
		Name:    "e2e/replicas",
		Timeout: 10 * time.Minute,
		// 40 pods: paged by 3, a list is 14 pages, each reaching either replica.
		Sim:                kubeletsim.Config{Nodes: 4, PodsPerNode: 10, ContainersPerPod: 1, Namespaces: 3, Host: "127.0.0.1"},
		ExtraAPIServerArgs: []string{"--enable-aggregator-routing=true"},
		Setup:              setup,
	}))
}

// setup starts two kubelet-source replicas on this machine's non-loopback address (endpoints may not be loopback
// ones), each on its own port, and serves the APIServices from their one Service.
func setup(ctx context.Context, s *framework.Suite) error {
	env.cp, env.sim, env.metrics = s.CP, s.Sim, s.Metrics
	api, err := env.cp.SetupMetricsAPI(ctx)
	if err != nil {
		return err
	}
	ip, err := framework.NonLoopbackIP()
	if err != nil {
		return err
	}
	ports, err := framework.FreePorts(2, ip)
	if err != nil {
		return err
	}
	for i, port := range ports {
		r, err := api.StartBackend(ctx, framework.BackendConfig{
			Service: service, Replica: fmt.Sprintf("%s-%c", service, 'a'+i), IP: ip, Port: port,
			Resolution: resolution, Args: framework.KubeletSourceArgs(s.SimCA),
		})
		if err != nil {
			return err
		}
		env.replicas = append(env.replicas, r)
	}
	for _, r := range env.replicas {
		if err := r.WaitReady(ctx, 2*time.Minute); err != nil {
			return err
		}
	}
	return api.ServeReplicas(ctx, service, env.replicas, 3*time.Minute)
}
