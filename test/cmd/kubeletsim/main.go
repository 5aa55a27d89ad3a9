// Command kubeletsim runs the kubelet simulator as its own process, so a scale run can measure the simulator's
// CPU apart from metrics-ring's, or a developer can point a Prometheus or metrics-server at simulated nodes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

func main() {
	var cfg kubeletsim.Config
	flag.IntVar(&cfg.Nodes, "nodes", 5, "simulated nodes")
	flag.IntVar(&cfg.PodsPerNode, "pods-per-node", 8, "pods per node")
	flag.IntVar(&cfg.ContainersPerPod, "containers-per-pod", 2, "containers per pod")
	flag.IntVar(&cfg.Namespaces, "namespaces", 2, "namespaces the pods are spread over")
	flag.StringVar(&cfg.Host, "host", "127.0.0.1", "loopback address the nodes listen on")
	flag.BoolVar(&cfg.FastResource, "fast-resource", false, "serve plain-text /metrics/resource from the fast renderer")
	kubeconfig := flag.String("kubeconfig", "", "register Nodes and Pods in this cluster (optional)")
	caOut := flag.String("ca-out", "", "write the CA that signed the nodes' serving certificates here")
	control := flag.String("control-address", "127.0.0.1:8090", "serves /truth and /ports (JSON); empty disables")
	foreign := flag.String("foreign", "", "THIEF=VICTIM: node THIEF also reports node VICTIM's pods, with values "+
		"multiplied by --foreign-factor (as the old node of a pod recreated elsewhere does); /truth keeps the true values")
	factor := flag.Uint64("foreign-factor", 1000, "factor on the values of the pods --foreign reports")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(cfg, *kubeconfig, *caOut, *control, *foreign, *factor); err != nil {
		klog.ErrorS(err, "kubeletsim failed")
		os.Exit(1)
	}
}

func run(cfg kubeletsim.Config, kubeconfig, caOut, control, foreign string, factor uint64) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sim, err := kubeletsim.New(cfg)
	if err != nil {
		return err
	}
	if foreign != "" {
		thief, victim, ok := strings.Cut(foreign, "=")
		if !ok {
			return fmt.Errorf("--foreign=%q: want THIEF=VICTIM (two node names)", foreign)
		}
		if err := sim.SetForeign(thief, victim, factor); err != nil {
			return fmt.Errorf("--foreign: %w", err)
		}
	}
	if err := sim.Start(ctx); err != nil {
		return err
	}
	defer sim.Stop()
	if caOut != "" {
		if err := os.WriteFile(caOut, sim.CACertPEM(), 0o644); err != nil {
			return err
		}
	}
	if kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		rc.QPS, rc.Burst = 500, 1000 // registration of thousands of objects; the sim bounds its own parallelism
		c, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := sim.Register(ctx, c); err != nil {
			return err
		}
		klog.InfoS("registered", "nodes", len(sim.Nodes()), "pods", len(sim.Pods()), "took", time.Since(start))
	}
	if control != "" {
		mux := http.NewServeMux()
		mux.Handle("/truth", sim.TruthHandler())
		mux.HandleFunc("/ports", func(w http.ResponseWriter, _ *http.Request) {
			ports := map[string]int{}
			for _, n := range sim.Nodes() {
				ports[n] = sim.Port(n)
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(ports)
		})
		srv := &http.Server{Addr: control, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				klog.ErrorS(err, "control server stopped")
			}
		}()
		defer srv.Close()
	}
	klog.InfoS("kubeletsim running; Ctrl-C stops it", "nodes", len(sim.Nodes()), "pods", len(sim.Pods()),
		"control", control)
	<-ctx.Done()
	return nil
}
