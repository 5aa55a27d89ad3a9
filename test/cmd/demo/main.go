// Command demo runs metrics-ring the way a user meets it: a local control plane (etcd + kube-apiserver on
// loopback), simulated kubelets, and metrics-ring behind the v1.metrics.k8s.io and v1beta1.metrics.k8s.io
// APIServices. It prints `kubectl top` (kubectl 1.37, which reads v1) with swap once everything answers, tells the user which KUBECONFIG to export, serves the simulator's
// truth, and stops every process it started on Ctrl-C. `make demo` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

type options struct {
	cache, dir                       string
	nodes, pods, containers, nsCount int
	resolution                       time.Duration
	keep, realNode                   bool
}

func main() {
	var o options
	flag.StringVar(&o.cache, "cache-dir", framework.DefaultCacheDir(), "where built tools are kept, by version")
	flag.StringVar(&o.dir, "dir", "", "folder for this run's certificates, kubeconfig and logs (default: a new temporary folder)")
	flag.IntVar(&o.nodes, "nodes", 5, "simulated nodes")
	flag.IntVar(&o.pods, "pods", 40, "simulated pods, spread evenly over the nodes")
	flag.IntVar(&o.containers, "containers", 2, "containers per pod")
	flag.IntVar(&o.nsCount, "namespaces", 3, "namespaces the pods are spread over")
	flag.DurationVar(&o.resolution, "metric-resolution", 5*time.Second, "metrics-ring's --metric-resolution")
	flag.BoolVar(&o.keep, "keep", false, "keep the run folder (logs, certificates) after exit")
	flag.BoolVar(&o.realNode, "real-node", true, "also start a real kubelet (containerd, runc) running a pod that burns 250m, when this machine can (root, Linux)")
	flag.Parse()
	giveBack := takeTerminal()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C while stopping ends the demo at once; the kernel kills its children (Pdeathsig)
	}()
	err := run(ctx, o)
	giveBack()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.nodes < 1 || o.pods < o.nodes {
		return fmt.Errorf("need at least one node and one pod per node (got %d nodes, %d pods)", o.nodes, o.pods)
	}
	tools, err := framework.EnsureTools(o.cache, os.Stderr)
	if err != nil {
		return err
	}
	if o.dir == "" {
		if o.dir, err = os.MkdirTemp("", "metrics-ring-demo-"); err != nil {
			return err
		}
	}
	if !o.keep {
		defer os.RemoveAll(o.dir)
	}
	cp, err := framework.Start(ctx, framework.Options{Tools: tools, Dir: o.dir, Out: os.Stderr})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "stopping...")
		cp.Stop()
	}()

	sim, err := kubeletsim.New(kubeletsim.Config{
		Nodes: o.nodes, PodsPerNode: o.pods / o.nodes, ContainersPerPod: o.containers, Namespaces: o.nsCount, Host: "127.0.0.1",
	})
	if err != nil {
		return fmt.Errorf("creating simulator: %w", err)
	}
	if err := sim.Start(ctx); err != nil {
		return fmt.Errorf("starting simulator: %w", err)
	}
	defer sim.Stop()
	fmt.Fprintf(os.Stderr, "registering %d simulated nodes and %d pods\n", len(sim.Nodes()), len(sim.Pods()))
	if err := sim.Register(ctx, cp.Client); err != nil {
		return fmt.Errorf("registering simulated nodes and pods: %w", err)
	}
	nodes, pods := len(sim.Nodes()), len(sim.Pods())
	var real *framework.RealNode
	if o.realNode {
		if real = startRealNode(ctx, cp, o.dir); real != nil {
			defer real.Stop()
			nodes, pods = nodes+1, pods+1
		}
	}
	caBundle, err := kubeletCABundle(o.dir, sim.CACertPEM(), real)
	if err != nil {
		return err
	}
	truthURL, err := serveTruth(ctx, sim.TruthHandler())
	if err != nil {
		return err
	}

	api, err := cp.SetupMetricsAPI(ctx)
	if err != nil {
		return err
	}
	b, err := api.StartBackend(ctx, framework.BackendConfig{
		Service: "metrics-ring-kubelet", IP: "127.0.0.2", Resolution: o.resolution,
		Args: framework.KubeletSourceArgs(caBundle),
	})
	if err != nil {
		return err
	}
	if err := api.PointAPIService(ctx, b.Service); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "waiting for APIServices %s to become Available...\n", strings.Join(framework.APIServiceNames, ", "))
	if err := api.WaitAvailable(ctx, b, 3*time.Minute); err != nil {
		cp.DumpLogs(os.Stderr, 30)
		return err
	}
	fmt.Fprintln(os.Stderr, "waiting until kubectl top lists every node and pod...")
	if err := waitTop(ctx, cp, nodes, pods); err != nil {
		cp.DumpLogs(os.Stderr, 30)
		return err
	}
	// --show-swap: the simulated Nodes report swap capacity and some containers swap, as kubelets with swap do.
	for _, args := range [][]string{{"top", "nodes", "--show-swap"}, {"top", "pods", "-A", "--show-swap"}} {
		out, _ := kubectl(ctx, cp, args...)
		fmt.Printf("\n$ kubectl %s\n%s", strings.Join(args, " "), out)
	}
	if real != nil {
		fmt.Printf("\n%s is a real kubelet on this machine (containerd, runc, cgroups): pod default/%s tries to burn %dm there\n"+
			"(less when this machine's cores are busy: what kubectl top shows is what its cgroup used).\n", realNodeName, burnPod, burnMillicore)
	}
	fmt.Printf(`
metrics-ring is serving metrics.k8s.io through kube-apiserver's aggregator. Explore it:

  export KUBECONFIG=%s
  alias kubectl=%s
  kubectl top pods -A --show-swap
  kubectl get --raw /apis/metrics.k8s.io/v1/nodes
  kubectl get --raw /apis/metrics.k8s.io/v1beta1/namespaces/%s/pods
  kubectl explain podmetrics.containers.usage
  kubectl get apiservice %s

The simulator's truth (what the answers must be): %s
Logs: %s/*.log (removed on exit unless the demo runs with -keep)
Press Ctrl-C to stop everything.
`, cp.AdminKubeconfig, tools.Kubectl, sim.Pods()[0].Namespace, strings.Join(framework.APIServiceNames, " "), truthURL, o.dir)
	<-ctx.Done()
	return nil
}

func kubectl(ctx context.Context, cp *framework.ControlPlane, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, cp.Tools.Kubectl, append([]string{"--kubeconfig=" + cp.AdminKubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// waitTop waits until kubectl top shows every node (none <unknown>) and every pod.
func waitTop(ctx context.Context, cp *framework.ControlPlane, nodes, pods int) error {
	return framework.Poll(ctx, "kubectl top to list everything", time.Second, realNodeWait, func(ctx context.Context) (bool, error) {
		out, err := kubectl(ctx, cp, "top", "nodes", "--no-headers")
		if err != nil {
			return false, err
		}
		if n := countLines(out); n != nodes || strings.Contains(out, "<unknown>") {
			return false, fmt.Errorf("top nodes lists %d of %d nodes:\n%s", n, nodes, out)
		}
		if out, err = kubectl(ctx, cp, "top", "pods", "-A", "--no-headers"); err != nil {
			return false, err
		}
		if n := countLines(out); n != pods {
			return false, fmt.Errorf("top pods lists %d of %d pods", n, pods)
		}
		return true, nil
	})
}

func countLines(s string) int {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

func serveTruth(ctx context.Context, h http.Handler) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listening for the truth endpoint: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return "http://" + l.Addr().String() + "/", nil
}
