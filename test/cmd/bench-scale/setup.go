package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fastClient is a client allowed to go as fast as kube-apiserver takes it: registration, churn, checks.
func fastClient(cp *framework.ControlPlane) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the benchmark's client: %w", err)
	}
	return c, nil
}

// registerCluster writes the simulated Nodes and Pods (with -hpa, first the workloads their pods belong to, and
// after them the HPAs and kube-controller-manager); the simulator logs progress every few seconds.
func registerCluster(ctx context.Context, cp *framework.ControlPlane, c kubernetes.Interface, sim *kubeletsim.Sim,
	o options) (time.Duration, error) {
	start := time.Now()
	var ws []kubeletsim.Workload
	if o.hpa > 0 {
		var err error
		if ws, err = sim.RegisterWorkloads(ctx, c, o.hpa); err != nil {
			return 0, err
		}
	}
	fmt.Fprintf(os.Stderr, "registering %d nodes and %d pods (progress every 5 s)...\n", len(sim.Nodes()), len(sim.Pods()))
	if err := sim.Register(ctx, c); err != nil {
		return 0, fmt.Errorf("registering simulated nodes and pods: %w", err)
	}
	d := time.Since(start)
	fmt.Fprintf(os.Stderr, "registered in %s\n", d.Round(time.Second))
	if o.hpa > 0 {
		if err := startHPAFleet(ctx, cp, c, o, ws); err != nil {
			return d, err
		}
	}
	return d, nil
}
