package realinstall

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

const (
	nodeName = "real-node"
	// image is what the chart and the overlay run: built here (framework.BuildMetricsRingImage) and imported into
	// the node's containerd under this name; nothing can pull it.
	image = "metrics-ring-test/metrics-ring:e2e"
	// systemNamespace is where both installs live (and where metrics-server's suite looks for its pods).
	systemNamespace = "kube-system"
	// skipLabel marks the simulated node metrics-server's suite expects not to be served (its node-selector
	// spec); both installs run with --node-selector=metrics-server-skip!=true, as its CI's chart values say.
	skipLabel = "metrics-server-skip"
)

var env struct {
	// skip says why no real node runs on this machine; the tests skip with it.
	skip    string
	cp      *framework.ControlPlane
	node    *framework.RealNode
	metrics metricsclient.Interface
	// simNode is the simulated node, labelled skipLabel=true and tainted so that nothing is scheduled on it.
	simNode string
	helm    string
	repo    string
	// archive is metrics-ring's image (`make image-archive`), imported into every real node.
	archive string
	// msSuite is metrics-server's end-to-end suite compiled (built beside the node's start); msSuiteErr says why not.
	msSuite    string
	msSuiteErr error
}

func TestMain(m *testing.M) {
	skip, err := framework.RealNodeSkip()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/realinstall: %v\n", err)
		os.Exit(1)
	}
	if skip != "" {
		env.skip = skip
		os.Exit(m.Run())
	}
	os.Exit(framework.RunSuite(m, framework.SuiteConfig{
		Name: "e2e/realinstall",
		// Cold, the builds (kube-scheduler, metrics-ring's image, metrics-server's suite) take most of it.
		Timeout: 35 * time.Minute,
		// The simulated node is the one metrics-server's suite must find unserved; its pod is never scraped.
		Sim:            kubeletsim.Config{Nodes: 1, PodsPerNode: 1, ContainersPerPod: 1, Namespaces: 1, NodePrefix: "sim-skipped-", Host: "127.0.0.1"},
		PodsOnRealNode: true,
		Setup:          setup,
	}))
}

// setup starts the real node, reachable by its pods' in-cluster clients, kube-scheduler and
// kube-controller-manager, and imports metrics-ring's image, built meanwhile.
func setup(ctx context.Context, s *framework.Suite) error {
	env.cp, env.metrics = s.CP, s.Metrics
	modDir, err := framework.ModuleDir()
	if err != nil {
		return err
	}
	env.repo = filepath.Dir(modDir)
	built := make(chan error, 1)
	go func() {
		var err error
		env.archive, err = framework.BuildMetricsRingImage(ctx, s.Dir, image, os.Stderr)
		if err == nil {
			env.msSuite, env.msSuiteErr = framework.BuildMetricsServerE2E(framework.DefaultCacheDir(), metricsServerVersion, os.Stderr)
		}
		built <- err
	}()
	err = setupCluster(ctx, s)
	if berr := <-built; err == nil {
		err = berr
	}
	if err != nil || env.node == nil {
		return err
	}
	return env.node.ImportImages(ctx, env.archive)
}

// setupCluster starts the real node and what pods on it need.
func setupCluster(ctx context.Context, s *framework.Suite) (err error) {
	if env.node, env.skip, err = s.StartRealNode(ctx, nodeName); env.node == nil {
		return err
	}
	if err := admitNodes(ctx, s); err != nil {
		return err
	}
	if err := env.node.RouteKubernetesService(ctx, s.CP); err != nil {
		return err
	}
	if err := s.CP.StartScheduler(ctx); err != nil {
		return err
	}
	if err := s.CP.StartControllerManager(ctx); err != nil {
		return err
	}
	env.helm, err = framework.EnsureHelm(framework.DefaultCacheDir(), os.Stderr)
	return err
}

// admitNodes removes the not-ready taint the TaintNodesByCondition admission put on the real node when it
// registered (admitRealNode), and labels and taints the simulated one, which nothing may be scheduled on.
func admitNodes(ctx context.Context, s *framework.Suite) error {
	nodes := s.Sim.Nodes()
	if len(nodes) != 1 {
		return fmt.Errorf("want one simulated node, have %d", len(nodes))
	}
	env.simNode = nodes[0]
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}},"spec":{"taints":[{"key":"metrics-ring-test/simulated","value":"true","effect":"NoSchedule"}]}}`,
		skipLabel)
	if _, err := s.CP.Client.CoreV1().Nodes().Patch(ctx, env.simNode, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching node %s: %w", env.simNode, err)
	}
	return admitRealNode(ctx, nodeName)
}

// admitRealNode removes the not-ready taint the TaintNodesByCondition admission put on a real node when it
// registered (the node lifecycle controller would, once Ready; it is not run: it would also evict from the
// simulated node).
func admitRealNode(ctx context.Context, name string) error {
	if _, err := env.cp.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching node %s: %w", name, err)
	}
	return nil
}

// needNode skips the test when this machine cannot run a real node (see TestMain).
func needNode(t *testing.T) {
	t.Helper()
	if env.skip != "" {
		t.Skip("no real node: " + env.skip)
	}
}
