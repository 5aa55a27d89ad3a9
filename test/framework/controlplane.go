// Package framework runs a local Kubernetes control plane for metrics-ring's end-to-end tests and demo:
// etcd, kube-apiserver (with its aggregator) and, when asked, kube-controller-manager, all on 127.0.0.1 with
// throwaway PKI, plus metrics-ring backends behind the v1 and v1beta1.metrics.k8s.io APIServices. It owns building the
// pinned tools, process lifetimes (process groups, logs per run) and bounded readiness waits, and what every
// end-to-end package shares: its TestMain and cluster (RunSuite), Eventually, Kubectl and the expectations
// (kubectl's printing, the simulator's truth), so that each exists once.
package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options configure a control plane.
type Options struct {
	Tools Tools
	// Dir holds this run's certificates, kubeconfigs, etcd data and logs; it is created if missing.
	Dir string
	// Out receives progress lines; nil discards them.
	Out io.Writer
	// ExtraAPIServerArgs are appended to kube-apiserver's flags (a later flag wins), e.g. higher in-flight
	// limits for the scale benchmark.
	ExtraAPIServerArgs []string
	// NodeAddress, when set, makes a control plane for pods of a real node (the chart and overlays installed for
	// real): kube-apiserver listens and advertises there (pods cannot reach loopback), its certificate names it
	// and the kubernetes Service's address, the ServiceAccount admission plugin runs (pods get tokens), the
	// aggregator dials the endpoints of an APIService's Service (pod addresses: no kube-proxy runs), and the
	// controller manager runs what pods need (see StartControllerManager).
	NodeAddress string
}

// KubernetesServiceIP is the kubernetes Service's address, the first of --service-cluster-ip-range.
const KubernetesServiceIP = "10.0.0.1"

// ControlPlane is a running etcd + kube-apiserver (+ kube-controller-manager).
type ControlPlane struct {
	Dir   string
	Tools Tools
	Out   io.Writer
	// URL is kube-apiserver's https address.
	URL                            string
	ServerCA, ClientCA, FrontProxy *CA
	// AdminKubeconfig authenticates as a system:masters user.
	AdminKubeconfig string
	Config          *rest.Config
	Client          kubernetes.Interface

	admin     *KeyPair
	extraArgs []string
	// nodeAddress is Options.NodeAddress.
	nodeAddress string
	etcd        *Process
	apiserver   *Process
	kcm         *Process

	mu    sync.Mutex
	procs []*Process
}

const stopGrace = 10 * time.Second

// Start starts etcd and kube-apiserver and waits until the apiserver's /readyz passes. On error everything
// started so far is stopped and the logs' tails are written to Out.
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", opts.Dir, err)
	}
	cp = &ControlPlane{Dir: opts.Dir, Tools: opts.Tools, Out: opts.Out, extraArgs: opts.ExtraAPIServerArgs, nodeAddress: opts.NodeAddress}
	defer func() {
		if err != nil {
			cp.DumpLogs(cp.Out, 40)
			cp.Stop()
		}
	}()
	if err := cp.startEtcd(ctx); err != nil {
		return cp, err
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return cp, err
	}
	return cp, nil
}

func (cp *ControlPlane) track(p *Process) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.procs = append(cp.procs, p)
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	ports, err := FreePorts(2, "127.0.0.1") // distinct: etcd cannot serve clients and peers on one port
	if err != nil {
		return err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cp.etcd = NewProcess(cp.Dir, "etcd", cp.Tools.Etcd,
		"--name=default", "--data-dir="+filepath.Join(cp.Dir, "etcd-data"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=default="+peer,
		// Test data is thrown away: skip fsync so a shared disk does not slow every write.
		"--unsafe-no-fsync", "--log-level=warn")
	cp.track(cp.etcd)
	fmt.Fprintf(cp.Out, "starting etcd on %s\n", client)
	if err := cp.etcd.Start(); err != nil {
		return err
	}
	return cp.waitHTTP(ctx, cp.etcd, client+"/health", nil, time.Minute)
}

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	address := "127.0.0.1"
	if cp.nodeAddress != "" {
		address = cp.nodeAddress
	}
	cp.URL = "https://" + net.JoinHostPort(address, strconv.Itoa(port))
	pki := filepath.Join(cp.Dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", pki, err)
	}
	if cp.ServerCA, err = NewCA(pki, "server-ca"); err != nil {
		return err
	}
	if cp.ClientCA, err = NewCA(pki, "client-ca"); err != nil {
		return err
	}
	if cp.FrontProxy, err = NewCA(pki, "front-proxy-ca"); err != nil {
		return err
	}
	serving, err := cp.ServerCA.Issue(pki, "apiserver", CertSpec{
		CommonName: "kube-apiserver", Server: true,
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPs:      []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(address), net.ParseIP(KubernetesServiceIP)},
	})
	if err != nil {
		return err
	}
	// kube-apiserver's identity toward kubelets (logs, port-forward), as kubeadm's.
	kubeletClient, err := cp.ClientCA.Issue(pki, "apiserver-kubelet-client", CertSpec{
		CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"},
	})
	if err != nil {
		return err
	}
	proxyClient, err := cp.FrontProxy.Issue(pki, "front-proxy-client", CertSpec{CommonName: "front-proxy-client"})
	if err != nil {
		return err
	}
	if cp.admin, err = cp.ClientCA.Issue(pki, "admin", CertSpec{CommonName: "admin", Organization: []string{"system:masters"}}); err != nil {
		return err
	}
	saKey := filepath.Join(pki, "service-account.key")
	if err := writeSigningKey(saKey); err != nil {
		return err
	}
	cp.AdminKubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.AdminKubeconfig, cp.URL, cp.ServerCA.CertPEM, "admin", cp.admin); err != nil {
		return err
	}
	cp.Config = restConfig(cp.URL, cp.ServerCA.CertPEM, cp.admin)
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return fmt.Errorf("building admin client: %w", err)
	}
	cp.apiserver = NewProcess(cp.Dir, "kube-apiserver", cp.Tools.APIServer,
		"--etcd-servers="+strings.TrimSuffix(cp.etcdURL(), "/"),
		"--bind-address="+address, "--advertise-address="+address, "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+pki,
		"--tls-cert-file="+serving.CertFile, "--tls-private-key-file="+serving.KeyFile,
		"--client-ca-file="+cp.ClientCA.CertFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--requestheader-client-ca-file="+cp.FrontProxy.CertFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+proxyClient.CertFile, "--proxy-client-key-file="+proxyClient.KeyFile,
		"--kubelet-client-certificate="+kubeletClient.CertFile, "--kubelet-client-key="+kubeletClient.KeyFile,
		"-v=1")
	cp.apiserver.Args = append(cp.apiserver.Args, cp.modeArgs()...)
	cp.apiserver.Args = append(cp.apiserver.Args, cp.extraArgs...)
	cp.track(cp.apiserver)
	fmt.Fprintf(cp.Out, "starting kube-apiserver on %s\n", cp.URL)
	return cp.startAndWaitAPIServer(ctx)
}

// modeArgs are kube-apiserver's flags that differ between a control plane of simulated nodes on loopback and
// one for pods of a real node (Options.NodeAddress).
func (cp *ControlPlane) modeArgs() []string {
	if cp.nodeAddress != "" {
		// ServiceAccount admission is on (the default), and the kubernetes Service's endpoints are the node's
		// address (the default lease reconciler).
		// The node's name resolves nowhere: kube-apiserver reaches its kubelet (logs, port-forward) by address.
		return []string{"--enable-aggregator-routing=true", "--kubelet-preferred-address-types=InternalIP"}
	}
	return []string{
		// The default, spelled out: the aggregator resolves a Service (ExternalName here) rather than
		// endpoints, which is what lets each backend live on its own loopback address.
		"--enable-aggregator-routing=false",
		// No token controller runs here, so pods must not wait for a ServiceAccount token.
		"--disable-admission-plugins=ServiceAccount",
		// The kubernetes Service's endpoints cannot be a loopback address; nothing here needs them.
		"--endpoint-reconciler-type=none",
	}
}

func (cp *ControlPlane) etcdURL() string {
	for _, a := range cp.etcd.Args {
		if v, ok := strings.CutPrefix(a, "--advertise-client-urls="); ok {
			return v
		}
	}
	return ""
}

func (cp *ControlPlane) startAndWaitAPIServer(ctx context.Context) error {
	if err := cp.apiserver.Start(); err != nil {
		return err
	}
	return cp.waitHTTP(ctx, cp.apiserver, cp.URL+"/readyz", cp.admin, 3*time.Minute)
}

// RestartAPIServer stops kube-apiserver and starts it again with the same flags and port, waiting for
// /readyz.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	cp.apiserver.Stop(stopGrace)
	return cp.startAndWaitAPIServer(ctx)
}

// waitHTTP polls url until it answers 200, failing fast if p exits.
func (cp *ControlPlane) waitHTTP(ctx context.Context, p *Process, url string, client *KeyPair, timeout time.Duration) error {
	var caPEM []byte
	if strings.HasPrefix(url, "https:") {
		caPEM = cp.ServerCA.CertPEM
	}
	hc, err := httpsClient(caPEM, client)
	if err != nil {
		return err
	}
	return Poll(ctx, p.Name+" at "+url, 250*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, StopPolling(fmt.Errorf("%s exited: %v; log: %s", p.Name, err, p.LogFile))
		}
		code, body, err := getStatus(ctx, hc, url)
		if err != nil {
			return false, err
		}
		if code != 200 {
			return false, fmt.Errorf("status %d: %s", code, tailLines([]byte(body), 5))
		}
		return true, nil
	})
}

// DumpLogs writes the last n lines of every process's log to w.
func (cp *ControlPlane) DumpLogs(w io.Writer, n int) {
	cp.mu.Lock()
	procs := append([]*Process(nil), cp.procs...)
	cp.mu.Unlock()
	for _, p := range procs {
		p.DumpTail(w, n)
	}
}

// Stop stops every process this control plane started, newest first.
func (cp *ControlPlane) Stop() {
	cp.mu.Lock()
	procs := append([]*Process(nil), cp.procs...)
	cp.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(stopGrace)
	}
}
