package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// resolution is metrics-ring's --metric-resolution here: short, so replicas have data quickly.
const resolution = 2 * time.Second

// settle bounds how long a fresh pipeline may take to serve everything: two samples per series, plus slack
// for a loaded two-core machine.
const settle = 30 * time.Second

// The ServiceAccount the manifests create and the Deployments run as.
const (
	namespace      = "kube-system"
	serviceAccount = "metrics-ring"
)

// Replica A is what the APIService points at; replica B is the second replica of the high-availability
// overlay. In a cluster one Service balances over both pods; here each has its own ExternalName Service and
// loopback address, and losing A means pointing the APIService at B.
const (
	serviceA, ipA = "metrics-ring-kubelet", "127.0.0.2"
	serviceB, ipB = "metrics-ring-kubelet-b", "127.0.0.3"
)

// env is the package's cluster. Tests run one after another (no t.Parallel).
var env struct {
	cp      *framework.ControlPlane
	sim     *kubeletsim.Sim
	simCA   string
	repo    string // the main module's directory, holding manifests/
	metrics metricsclient.Interface

	// Set up on first use by replicaA, so that until then the cluster holds no metrics-ring object and
	// TestApplyDryRunServer sees what an operator's first install sees.
	once       sync.Once
	onceErr    error
	api        *framework.MetricsAPI
	saToken    string // a TokenRequest token of system:serviceaccount:kube-system:metrics-ring
	saKube     string // a kubeconfig with saToken
	a          *framework.Backend
	backendsUp bool
}

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, framework.SuiteConfig{
		Name:    "e2e/deploy",
		Timeout: 15 * time.Minute,
		Sim:     kubeletsim.Config{Nodes: 3, PodsPerNode: 3, ContainersPerPod: 2, Namespaces: 2, Host: "127.0.0.1"},
		Setup:   setup,
	}))
}

// setup starts no metrics-ring: replicaA does, on first use.
func setup(_ context.Context, s *framework.Suite) error {
	env.cp, env.sim, env.simCA, env.metrics = s.CP, s.Sim, s.SimCA, s.Metrics
	mod, err := framework.ModuleDir()
	if err != nil {
		return err
	}
	env.repo = filepath.Dir(mod)
	return nil
}

// replicaA installs the base manifests' ServiceAccount and RBAC for real (everything but the APIService, which
// the framework creates with a caBundle and the backends' port), and starts replica A running as that
// ServiceAccount behind the APIService. The first call does the work; later calls return the same backend.
func replicaA(t *testing.T) *framework.Backend {
	t.Helper()
	env.once.Do(func() { env.onceErr = setupReplicaA(context.Background()) })
	if env.onceErr != nil {
		t.Fatal(env.onceErr)
	}
	return env.a
}

func setupReplicaA(ctx context.Context) error {
	rendered, err := env.cp.KubectlOutput(ctx, "", "kustomize", filepath.Join(env.repo, "manifests", "base"))
	if err != nil {
		return err
	}
	docs, dropped := withoutKind(rendered, "APIService")
	if dropped != len(framework.APIServiceNames) {
		return fmt.Errorf("manifests/base renders %d APIServices, want %d", dropped, len(framework.APIServiceNames))
	}
	env.backendsUp = true
	if _, _, err := env.cp.KubectlStreams(ctx, docs, "", "apply", "-f", "-"); err != nil {
		return err
	}
	// RBAC takes effect when kube-apiserver's authorizer has seen the bindings: wait for that, so that the
	// backend's first requests are not denied.
	err = framework.Poll(ctx, "the manifests' RBAC to take effect", 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		err := serviceAccountMissingGrants(ctx)
		return err == nil, err
	})
	if err != nil {
		return err
	}
	token, err := env.cp.KubectlOutput(ctx, "", "create", "token", serviceAccount, "-n", namespace, "--duration=2h")
	if err != nil {
		return err
	}
	env.saToken = strings.TrimSpace(token)
	if env.saKube, err = env.cp.TokenKubeconfig("sa-"+serviceAccount, env.saToken); err != nil {
		return err
	}
	// The framework's own RBAC has the manifests' names, so it finds them and creates nothing: the
	// ServiceAccount's bindings from the manifests are the only grants metrics-ring gets.
	if env.api, err = env.cp.SetupMetricsAPI(ctx); err != nil {
		return err
	}
	if env.a, err = startReplica(ctx, serviceA, ipA); err != nil {
		return err
	}
	return env.api.ServeFrom(ctx, env.a, 3*time.Minute)
}

// startReplica starts a kubelet-source metrics-ring as the ServiceAccount and waits for its /readyz.
func startReplica(ctx context.Context, service, ip string) (*framework.Backend, error) {
	args := append(framework.KubeletSourceArgs(env.simCA), "--source=kubelet")
	b, err := env.api.StartBackend(ctx, framework.BackendConfig{
		Service: service, IP: ip, Resolution: resolution,
		Args: append(args, framework.IdentityArgs(env.saKube)...),
	})
	if err != nil {
		return nil, err
	}
	return b, b.WaitReady(ctx, 2*time.Minute)
}

// withoutKind drops the documents of kind from a multi-document YAML stream as kubectl kustomize prints it.
func withoutKind(yaml, kind string) (kept string, dropped int) {
	var docs []string
	for _, d := range strings.Split(yaml, "\n---\n") {
		if strings.Contains("\n"+d+"\n", "\nkind: "+kind+"\n") {
			dropped++
			continue
		}
		docs = append(docs, d)
	}
	return strings.Join(docs, "\n---\n"), dropped
}
