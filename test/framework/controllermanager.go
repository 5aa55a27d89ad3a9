package framework

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"
)

// StartControllerManager starts kube-controller-manager, if it is not running yet, with the HPA, Deployment
// and ReplicaSet controllers (what an autoscaling test needs) and the ClusterRole aggregation controller (so
// binding the built-in view role grants metrics.k8s.io, as in a real cluster), and waits for its /healthz. A
// short HPA sync period keeps tests quick. For pods of a real node (Options.NodeAddress) it also runs what they
// need: ServiceAccounts in every namespace, the kube-root-ca.crt ConfigMap their tokens' volumes mount, the
// endpoints of Services (the aggregator dials them) and the garbage collector (deleting a Deployment deletes
// its ReplicaSets and pods).
func (cp *ControlPlane) StartControllerManager(ctx context.Context) error {
	cp.mu.Lock()
	running := cp.kcm != nil
	cp.mu.Unlock()
	if running {
		return nil
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	serving, err := cp.ServerCA.Issue(cp.Dir+"/pki", "kube-controller-manager", CertSpec{
		CommonName: "kube-controller-manager", Server: true,
		DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
	})
	if err != nil {
		return err
	}
	controllers := "horizontalpodautoscaling,deployment,replicaset,clusterrole-aggregation"
	var extra []string
	if cp.nodeAddress != "" {
		controllers += ",serviceaccount,root-ca-cert-publisher,endpoint,endpointslice,garbagecollector"
		extra = append(extra, "--root-ca-file="+cp.ServerCA.CertFile)
	}
	kcm := NewProcess(cp.Dir, "kube-controller-manager", cp.Tools.ControllerManager,
		"--kubeconfig="+cp.AdminKubeconfig,
		"--authentication-kubeconfig="+cp.AdminKubeconfig,
		"--authorization-kubeconfig="+cp.AdminKubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+serving.CertFile, "--tls-private-key-file="+serving.KeyFile,
		"--leader-elect=false",
		"--controllers="+controllers,
		"--horizontal-pod-autoscaler-sync-period=5s",
		// Pods the test adopts are Ready at once; do not discard their CPU as start-up noise.
		"--horizontal-pod-autoscaler-cpu-initialization-period=5s",
		"--horizontal-pod-autoscaler-initial-readiness-delay=5s",
		"-v=2")
	kcm.Args = append(kcm.Args, extra...)
	fmt.Fprintf(cp.Out, "starting kube-controller-manager\n")
	if err := kcm.Start(); err != nil {
		return err
	}
	cp.track(kcm)
	if err := cp.waitHTTP(ctx, kcm, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", cp.admin, 2*time.Minute); err != nil {
		kcm.Stop(stopGrace)
		return err
	}
	cp.mu.Lock()
	cp.kcm = kcm
	cp.mu.Unlock()
	return nil
}
