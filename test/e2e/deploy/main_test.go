package deploy

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
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
	flag.Parse()
	os.Exit(framework.RunMain(m, "e2e/deploy", setupAndRun))
}

func setupAndRun(m *testing.M, dir string) (code int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mod, err := framework.ModuleDir()
	if err != nil {
		return 1, err
	}
	env.repo = filepath.Dir(mod)
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
	sim, err := kubeletsim.New(kubeletsim.Config{Nodes: 3, PodsPerNode: 3, ContainersPerPod: 2, Namespaces: 2, Host: "127.0.0.1"})
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
	if env.metrics, err = metricsclient.NewForConfig(cp.Config); err != nil {
		return 1, fmt.Errorf("building metrics client: %w", err)
	}
	return m.Run(), nil
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
	rendered, err := kubectl(ctx, "", "kustomize", filepath.Join(env.repo, "manifests", "base"))
	if err != nil {
		return err
	}
	docs, dropped := withoutKind(rendered, "APIService")
	if dropped != len(framework.APIServiceNames) {
		return fmt.Errorf("manifests/base renders %d APIServices, want %d", dropped, len(framework.APIServiceNames))
	}
	env.backendsUp = true
	if _, err := kubectlIn(ctx, docs, "", "apply", "-f", "-"); err != nil {
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
	token, err := kubectl(ctx, "", "create", "token", serviceAccount, "-n", namespace, "--duration=2h")
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
	if err := env.api.PointAPIService(ctx, serviceA); err != nil {
		return err
	}
	return env.api.WaitAvailable(ctx, env.a, 3*time.Minute)
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

// kubectl runs the built kubectl with the given kubeconfig (admin when empty) and returns its output.
func kubectl(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	return kubectlIn(ctx, "", kubeconfig, args...)
}

// kubectlIn is kubectl with stdin; it returns stdout (warnings on stderr would spoil -o json), and stderr in
// the error. Every call is bounded.
func kubectlIn(ctx context.Context, stdin, kubeconfig string, args ...string) (string, error) {
	if kubeconfig == "" {
		kubeconfig = env.cp.AdminKubeconfig
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.cp.Tools.Kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s%s", strings.Join(args, " "), err, stderr.Bytes(), stdout.Bytes())
	}
	return stdout.String(), nil
}

// eventually polls cond every half resolution for at most timeout and fails the test with cond's last
// complaint if it never holds.
func eventually(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
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
