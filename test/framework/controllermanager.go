package framework

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// TestControllerManagerArgs are the controller flags StartControllerManager uses: the HPA, Deployment and
// ReplicaSet controllers (what an autoscaling test needs) and the ClusterRole aggregation controller (so binding
// the built-in view role grants metrics.k8s.io, as in a real cluster), with a short HPA sync period that keeps
// tests quick.
var TestControllerManagerArgs = []string{
	"--controllers=horizontalpodautoscaling,deployment,replicaset,clusterrole-aggregation",
	"--horizontal-pod-autoscaler-sync-period=5s",
	// Pods the test adopts are Ready at once; do not discard their CPU as start-up noise.
	"--horizontal-pod-autoscaler-cpu-initialization-period=5s",
	"--horizontal-pod-autoscaler-initial-readiness-delay=5s",
	"-v=2",
}

// StartControllerManager starts kube-controller-manager with TestControllerManagerArgs, if it is not running
// yet, and waits for its /healthz. For pods of a real node (Options.NodeAddress) it also runs what they need:
// ServiceAccounts in every namespace, the kube-root-ca.crt ConfigMap their tokens' volumes mount, the endpoints
// of Services (the aggregator dials them), the garbage collector (deleting a Deployment deletes its
// ReplicaSets and pods) and the disruption controller (evictions, `kubectl drain`, honour PodDisruptionBudgets).
func (cp *ControlPlane) StartControllerManager(ctx context.Context) error {
	args := TestControllerManagerArgs
	if cp.nodeAddress != "" {
		args = make([]string, 0, len(TestControllerManagerArgs)+1)
		for _, a := range TestControllerManagerArgs {
			if strings.HasPrefix(a, "--controllers=") {
				a += ",serviceaccount,root-ca-cert-publisher,endpoint,endpointslice,garbagecollector,disruption"
			}
			args = append(args, a)
		}
		args = append(args, "--root-ca-file="+cp.ServerCA.CertFile)
	}
	return cp.StartControllerManagerWith(ctx, args)
}

// StartControllerManagerWith starts kube-controller-manager, if it is not running yet, with args (which
// controllers, their tuning, client QPS) after the flags that connect it to this control plane, and waits for
// its /healthz. The scale benchmark runs the HPA controller alone, tuned as a large cluster would.
func (cp *ControlPlane) StartControllerManagerWith(ctx context.Context, args []string) error {
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
	kcm := NewProcess(cp.Dir, "kube-controller-manager", cp.Tools.ControllerManager, append([]string{
		"--kubeconfig=" + cp.AdminKubeconfig,
		"--authentication-kubeconfig=" + cp.AdminKubeconfig,
		"--authorization-kubeconfig=" + cp.AdminKubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + serving.CertFile, "--tls-private-key-file=" + serving.KeyFile,
		"--leader-elect=false",
	}, args...)...)
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
