package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BackendConfig describes one metrics-ring process.
type BackendConfig struct {
	// Service is the ExternalName Service's name, e.g. metrics-ring-kubelet.
	Service string
	// IP is the loopback address it binds, e.g. 127.0.0.2; one per Service.
	IP string
	// Replica, when set, makes the backend one replica of several behind Service, named by it (its process, log
	// and certificate files): StartBackend creates no ExternalName Service, and ServeReplicas gives Service an
	// endpoint per replica, for a kube-apiserver with --enable-aggregator-routing=true.
	Replica string
	// Port is the port it listens on; 0 means the port every backend shares (MetricsAPI.Port).
	Port int
	// Resolution is --metric-resolution.
	Resolution time.Duration
	// Args are the source's flags (see KubeletSourceArgs).
	Args []string
	// Binary is the program to run; empty means the metrics-ring built from this repository. The scale
	// benchmark sets it to metrics-server, which takes the same flags, to compare the two on one cluster.
	Binary string
	// Env is added to the server's environment (KEY=VALUE) and to no other process's: the soak sets GODEBUG's
	// memprofilerate so that its heap profiles sample the server finely without slowing the control plane.
	Env []string
}

// Backend is a metrics-ring process behind the aggregator.
type Backend struct {
	BackendConfig
	Proc *Process
	m    *MetricsAPI
	hc   *http.Client
}

// ServingCAPEM is the CA certificate that signs the server's serving certificate, and ServerName the name the
// certificate is verified as: what a client in another process needs to reach the server directly.
func (b *Backend) ServingCAPEM() []byte { return b.m.ServingCA.CertPEM }

// ServerName is the name the server's serving certificate is verified as (see ServingCAPEM).
func (b *Backend) ServerName() string { return b.Service + "." + b.m.Namespace + ".svc" }

// KubeletSourceArgs are the kubelet-source flags an operator passes to metrics-server, for kubelets whose
// serving certificates are signed by the CA in caFile and whose port is in the Node status.
func KubeletSourceArgs(caFile string) []string {
	return []string{
		"--kubelet-use-node-status-port",
		"--kubelet-certificate-authority=" + caFile,
		"--kubelet-preferred-address-types=InternalIP",
	}
}

// StartBackend issues the backend's serving certificate for <service>.<namespace>.svc, creates its Service
// and starts metrics-ring with the flags metrics-server takes. It does not wait: see WaitReady.
func (m *MetricsAPI) StartBackend(ctx context.Context, cfg BackendConfig) (*Backend, error) {
	if cfg.Resolution == 0 {
		cfg.Resolution = 2 * time.Second
	}
	dir := filepath.Join(m.cp.Dir, "metrics-ring")
	host := cfg.Service + "." + m.Namespace + ".svc"
	name := cfg.Service
	if cfg.Replica != "" {
		name = cfg.Replica
	}
	if cfg.Port == 0 {
		cfg.Port = m.Port
	}
	serving, err := m.ServingCA.Issue(dir, name, CertSpec{
		CommonName: host, Server: true,
		DNSNames: []string{cfg.Service, cfg.Service + "." + m.Namespace, host, host + ".cluster.local"},
	})
	if err != nil {
		return nil, err
	}
	if cfg.Replica == "" {
		if err := m.createService(ctx, cfg.Service, cfg.IP); err != nil {
			return nil, err
		}
	}
	hc, err := httpsClient(m.ServingCA.CertPEM, m.cp.admin)
	if err != nil {
		return nil, err
	}
	// The certificate names the Service, not the address: verify it as the aggregator does.
	hc.Transport.(*http.Transport).TLSClientConfig.ServerName = host
	args := []string{
		"--kubeconfig=" + m.Kubeconfig,
		"--authentication-kubeconfig=" + m.Kubeconfig,
		"--authorization-kubeconfig=" + m.Kubeconfig,
		"--bind-address=" + cfg.IP,
		"--secure-port=" + strconv.Itoa(cfg.Port),
		"--tls-cert-file=" + serving.CertFile,
		"--tls-private-key-file=" + serving.KeyFile,
		"--metric-resolution=" + cfg.Resolution.String(),
		"-v=2",
	}
	b := &Backend{BackendConfig: cfg, m: m, hc: hc}
	bin := cfg.Binary
	if bin == "" {
		bin = m.cp.Tools.MetricsRing
	}
	b.Proc = NewProcess(m.cp.Dir, name, bin, append(args, cfg.Args...)...)
	b.Proc.Env = cfg.Env
	m.cp.track(b.Proc)
	fmt.Fprintf(m.cp.Out, "starting %s as %s on %s\n", filepath.Base(bin), name, b.URL())
	return b, b.Proc.Start()
}

// URL is the backend's own https address (the certificate names the Service, see Get).
func (b *Backend) URL() string {
	return "https://" + net.JoinHostPort(b.IP, strconv.Itoa(b.Port))
}

// Get fetches path from the backend directly as the admin user, verifying the serving certificate against
// the caBundle for the Service's name.
func (b *Backend) Get(ctx context.Context, path string) (int, string, error) {
	return getStatus(ctx, b.hc, b.URL()+path)
}

// Restart starts a stopped or killed backend again with the same flags.
func (b *Backend) Restart() error { return b.Proc.Start() }

// WaitReady waits until /readyz answers 200, failing fast if the process exits.
func (b *Backend) WaitReady(ctx context.Context, timeout time.Duration) error {
	return Poll(ctx, b.Proc.Name+" /readyz", 200*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		if exited, err := b.Proc.Exited(); exited {
			return false, StopPolling(fmt.Errorf("%s exited: %v; log: %s", b.Proc.Name, err, b.Proc.LogFile))
		}
		code, body, err := b.Get(ctx, "/readyz")
		if err != nil {
			return false, err
		}
		if code != http.StatusOK {
			return false, fmt.Errorf("status %d: %s", code, tailLines([]byte(body), 5))
		}
		return true, nil
	})
}

// WaitAvailable waits until every APIService reports Available=True and kube-apiserver proxies its version,
// failing fast if the backend they point at (if given) exits.
func (m *MetricsAPI) WaitAvailable(ctx context.Context, b *Backend, timeout time.Duration) error {
	return m.WaitAvailableOf(ctx, b, APIServiceNames, timeout)
}

// WaitAvailableOf is WaitAvailable for some of the APIServices: metrics-server v0.9.0 serves v1beta1 only.
func (m *MetricsAPI) WaitAvailableOf(ctx context.Context, b *Backend, names []string, timeout time.Duration) error {
	return Poll(ctx, "APIServices "+strings.Join(names, ", ")+" Available", 250*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		if b != nil {
			if exited, err := b.Proc.Exited(); exited {
				return false, StopPolling(fmt.Errorf("%s exited: %v; log: %s", b.Proc.Name, err, b.Proc.LogFile))
			}
		}
		ok, msg, err := m.apiServicesAvailable(ctx, names)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, errors.New(msg)
		}
		return true, m.proxied(ctx, names)
	})
}

// proxied checks that kube-apiserver proxies each APIService's version. The condition is written by the
// availability controller; the proxy answers from its own copy of the APIService, updated by another controller
// moments later, and until then answers 503 "service unavailable": a test's first request failed so in CI.
func (m *MetricsAPI) proxied(ctx context.Context, names []string) error {
	for _, name := range names {
		path := "/apis/metrics.k8s.io/" + APIServiceVersion(name)
		if _, err := m.cp.Client.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx); err != nil {
			return fmt.Errorf("%s is Available but kube-apiserver does not proxy %s yet: %w", name, path, err)
		}
	}
	return nil
}

// ServeFrom points the APIServices at b's Service and waits up to timeout until they are Available: how every
// e2e package puts its first backend behind the aggregator before its tests run.
func (m *MetricsAPI) ServeFrom(ctx context.Context, b *Backend, timeout time.Duration) error {
	if err := m.PointAPIService(ctx, b.Service); err != nil {
		return err
	}
	return m.WaitAvailable(ctx, b, timeout)
}
