package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// SuiteConfig is what one end-to-end package's cluster holds beyond what every package's shares. Every e2e
// package used to carry its own copy of the set-up around these few differences; one copy here keeps their
// clusters alike, and a fix to the set-up (an order, a log dump on failure) reaches all of them.
type SuiteConfig struct {
	// Name prefixes the set-up's messages and names the run's folder, e.g. "e2e/deploy".
	Name string
	// Timeout bounds the set-up and also the simulator's life (it stops when the set-up's context ends), so
	// it must cover the package's tests too.
	Timeout time.Duration
	// Sim sizes the simulated cluster.
	Sim kubeletsim.Config
	// BeforeControlPlane, when set, runs once the simulator serves and its CA is written, before the tools are
	// built and the control plane starts: for what should fail early or warm up meanwhile (Prometheus, whose
	// rate windows fill while kube-apiserver starts). CP and Metrics are nil then.
	BeforeControlPlane func(ctx context.Context, s *Suite) error
	// Setup, when set, runs last, once the simulated nodes and pods are registered: the package's own
	// metrics-ring backends and whatever its tests share. Until it returns nil no test runs.
	Setup func(ctx context.Context, s *Suite) error
	// ExtraAPIServerArgs are appended to kube-apiserver's flags (see Options).
	ExtraAPIServerArgs []string
	// PodsOnRealNode makes the control plane one for pods of a real node on this machine (Options.NodeAddress,
	// the node's address): for the chart and the overlays installed for real.
	PodsOnRealNode bool
}

// Suite is the shared cluster of one end-to-end package: a control plane, simulated kubelets whose nodes and
// pods are registered in it, and a metrics.k8s.io client through its aggregator. Its tests run one after
// another (no t.Parallel); a test that changes shared state restores it before it returns.
type Suite struct {
	// Name is SuiteConfig.Name.
	Name string
	// Dir is the run's folder (logs, certificates), kept after a failing run.
	Dir string
	CP  *ControlPlane
	Sim *kubeletsim.Sim
	// SimCA is the file holding the CA that signed the simulated kubelets' serving certificates.
	SimCA string
	// Metrics reads metrics.k8s.io through kube-apiserver, as controllers do.
	Metrics metricsclient.Interface

	onExit []func(failed bool)
}

// OnExit registers f to run after the tests (or a failed set-up), the last registered first, as defer
// would: told whether the run failed, so that it can dump logs then.
func (s *Suite) OnExit(f func(failed bool)) { s.onExit = append(s.onExit, f) }

func (s *Suite) setup(ctx context.Context, cfg SuiteConfig) error {
	sim, err := kubeletsim.New(cfg.Sim)
	if err != nil {
		return fmt.Errorf("creating simulator: %w", err)
	}
	if err := sim.Start(ctx); err != nil {
		return fmt.Errorf("starting simulator: %w", err)
	}
	s.Sim = sim
	s.OnExit(func(bool) { sim.Stop() })
	s.SimCA = filepath.Join(s.Dir, "kubelet-ca.crt")
	if err := os.WriteFile(s.SimCA, sim.CACertPEM(), 0o600); err != nil {
		return fmt.Errorf("writing kubelet CA: %w", err)
	}
	if cfg.BeforeControlPlane != nil {
		if err := cfg.BeforeControlPlane(ctx, s); err != nil {
			return err
		}
	}
	tools, err := EnsureTools(DefaultCacheDir(), os.Stderr)
	if err != nil {
		return err
	}
	opts := Options{Tools: tools, Dir: s.Dir, Out: os.Stderr, ExtraAPIServerArgs: cfg.ExtraAPIServerArgs}
	if cfg.PodsOnRealNode {
		if opts.NodeAddress, err = nodeIP(); err != nil {
			return err
		}
	}
	cp, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	s.CP = cp
	s.OnExit(func(failed bool) {
		if failed {
			cp.DumpLogs(os.Stderr, 60)
		}
		cp.Stop()
	})
	if err := sim.Register(ctx, cp.Client); err != nil {
		return fmt.Errorf("registering simulated nodes and pods: %w", err)
	}
	if s.Metrics, err = metricsclient.NewForConfig(cp.Config); err != nil {
		return fmt.Errorf("building metrics client: %w", err)
	}
	if cfg.Setup != nil {
		return cfg.Setup(ctx, s)
	}
	return nil
}
