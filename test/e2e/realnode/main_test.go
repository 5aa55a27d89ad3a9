package realnode

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// resolution is metrics-ring's --metric-resolution here: the kubelet's cAdvisor refreshes its numbers about
// every 10 s (housekeeping), so a shorter cycle would mostly read the same sample again.
const resolution = 5 * time.Second

const (
	nodeName       = "real-node"
	backendService = "metrics-ring-kubelet"
	backendIP      = "127.0.0.2"
	namespace      = "default"
)

var env struct {
	// skip says why no real node runs on this machine; the tests skip with it.
	skip    string
	cp      *framework.ControlPlane
	node    *framework.RealNode
	backend *framework.Backend
	metrics metricsclient.Interface
	// kubelet reads the real kubelet's /metrics/resource as metrics-ring does.
	kubelet *kubeletReader
	// ms is metrics-server scraping the same kubelets (read directly, not through the APIServices); msErr says
	// why it did not start (the tests comparing with it fail with it).
	ms    metricsclient.Interface
	msErr error
}

// The tests that mostly wait (on the kubelet's restarts and deletions, on an init container's end) run in
// parallel, after the ones measuring CPU against the cgroups and the HPA's: their pods have names of their own,
// and they keep the package inside about 5 minutes.

// unproven lists the tests not yet seen passing three runs in a row on a loaded machine: they run only with
// E2E_REALNODE=all, so that CI is never failed by a test still being stabilised (a proven one is set false).
var unproven = map[string]bool{
	"TestCPUAndMemoryAgainstCgroup": false, "TestKubectlTopAndV1beta1": false, "TestSidecar": false,
	"TestRestartedContainer": false, "TestDeletedPodGone": false,
	// Proven in three full runs in a row with E2E_REALNODE=all (HPA at 4 replicas, 0.89 to 0.99 of the target; the
	// Pending pod NotFound while its init container ran, as from metrics-server).
	"TestHPAScalesRealPods": false, "TestInitContainer": false,
	"TestSideBySideWithMetricsServer": false, "TestRecreatedPod": false,
}

func TestMain(m *testing.M) {
	waitersInParallel()
	if os.Getenv("E2E_REALNODE") != "all" && allUnproven() {
		// Nothing would run: start no node.
		env.skip = "not yet proven reliable on CI; run with E2E_REALNODE=all"
		os.Exit(m.Run())
	}
	skip, err := framework.RealNodeSkip()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/realnode: %v\n", err)
		os.Exit(1)
	}
	if skip != "" {
		env.skip = skip
		os.Exit(m.Run())
	}
	os.Exit(framework.RunSuite(m, framework.SuiteConfig{
		Name:    "e2e/realnode",
		Timeout: 25 * time.Minute,
		// One simulated node beside the real one, as in a mixed cluster: metrics-ring trusts both CAs.
		Sim:   kubeletsim.Config{Nodes: 1, PodsPerNode: 1, ContainersPerPod: 1, Namespaces: 1, Host: "127.0.0.1"},
		Setup: setup,
	}))
}

// setup starts the real node and one kubelet-source metrics-ring behind the APIServices.
func setup(ctx context.Context, s *framework.Suite) (err error) {
	env.cp, env.metrics = s.CP, s.Metrics
	if env.node, env.skip, err = s.StartRealNode(ctx, nodeName); env.node == nil {
		return err
	}
	if env.kubelet, err = newKubeletReader(s.CP, env.node); err != nil {
		return err
	}
	api, err := s.CP.SetupMetricsAPI(ctx)
	if err != nil {
		return err
	}
	bundle := filepath.Join(s.Dir, "kubelet-cas.crt")
	if err := concatFiles(bundle, s.SimCA, env.node.CAFile); err != nil {
		return err
	}
	env.backend, err = api.StartBackend(ctx, framework.BackendConfig{
		Service: backendService, IP: backendIP, Resolution: resolution,
		Args: framework.KubeletSourceArgs(bundle),
	})
	if err != nil {
		return err
	}
	if err := api.ServeFrom(ctx, env.backend, 3*time.Minute); err != nil {
		return err
	}
	_, env.ms, env.msErr = startMetricsServer(ctx, s.CP, api, bundle)
	if env.msErr != nil {
		fmt.Fprintf(os.Stderr, "e2e/realnode: %v\n", env.msErr)
		env.ms = nil
	}
	return nil
}

// waitersInParallel lets every parallel test of the package run at once unless -parallel says otherwise: they
// wait on the kubelet (restart back-offs, an init container's end), not on the cores, and go test's default of
// one per core would run them two by two on CI's 2 cores (about a minute more).
func waitersInParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "8")
	}
}

func concatFiles(dst string, srcs ...string) error {
	var all []byte
	for _, s := range srcs {
		data, err := os.ReadFile(s)
		if err != nil {
			return fmt.Errorf("reading %s: %w", s, err)
		}
		all = append(all, data...)
	}
	if err := os.WriteFile(dst, all, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}

func allUnproven() bool {
	for _, u := range unproven {
		if !u {
			return false
		}
	}
	return true
}

// needNode skips the test when this machine cannot run a real node (see TestMain), or when it is unproven.
func needNode(t *testing.T) {
	t.Helper()
	if unproven[t.Name()] && os.Getenv("E2E_REALNODE") != "all" {
		t.Skip("not yet proven reliable on CI; run with E2E_REALNODE=all")
	}
	if env.skip != "" {
		t.Skip("no real node: " + env.skip)
	}
}
