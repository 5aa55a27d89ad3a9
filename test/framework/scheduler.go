package framework

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"
)

// StartScheduler starts kube-scheduler (EnsureScheduler: the pinned version, built once) and waits for its
// /healthz; Stop stops it with the rest. Only pods of a real node need one: the simulator's pods are bound by
// the simulator.
func (cp *ControlPlane) StartScheduler(ctx context.Context) error {
	bin, err := EnsureScheduler(DefaultCacheDir(), cp.Out)
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	serving, err := cp.ServerCA.Issue(cp.Dir+"/pki", "kube-scheduler", CertSpec{
		CommonName: "kube-scheduler", Server: true,
		DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
	})
	if err != nil {
		return err
	}
	p := NewProcess(cp.Dir, "kube-scheduler", bin,
		"--kubeconfig="+cp.AdminKubeconfig,
		"--authentication-kubeconfig="+cp.AdminKubeconfig,
		"--authorization-kubeconfig="+cp.AdminKubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+serving.CertFile, "--tls-private-key-file="+serving.KeyFile,
		"--leader-elect=false", "-v=2")
	fmt.Fprintf(cp.Out, "starting kube-scheduler\n")
	if err := p.Start(); err != nil {
		return err
	}
	cp.track(p)
	return cp.waitHTTP(ctx, p, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", cp.admin, 2*time.Minute)
}
