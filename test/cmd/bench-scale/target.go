package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
	"k8s.io/client-go/kubernetes"
)

// target is a server under test and where its self-metrics say what the benchmark needs.
type target struct {
	name, service, ip, binary string
	args                      []string
	// collection is the histogram of one collection cycle's duration.
	collection string
	// failures are the counters of kubelet requests that failed or timed out.
	failures []string
	// freshness is the histogram of a sample's age when it became servable; "" when the server has none.
	freshness string
	// profiles says whether the benchmark takes pprof profiles of it (only of ours: the point is to find our
	// hot spots).
	profiles bool
	// watches says whether it serves watch and limit/continue (metrics-server does neither): the reader phase
	// runs only against such a server.
	watches bool
	// apiServices are the APIServices it serves (nil: every one of framework.APIServiceNames).
	apiServices []string
	// kubeletArgs, when not nil, replace framework.KubeletSourceArgs (how it finds and trusts the kubelets).
	kubeletArgs []string
}

func (t target) apiServicesOrAll() []string {
	if t.apiServices == nil {
		return framework.APIServiceNames
	}
	return t.apiServices
}

func metricsRing(bin string) target {
	return target{
		name: "metrics-ring", service: "metrics-ring-kubelet", ip: "127.0.0.2", binary: bin,
		args:       []string{"--source=kubelet"},
		collection: "metrics_ring_kubelet_collection_duration_seconds",
		failures:   []string{`metrics_ring_kubelet_requests_total{outcome="error"}`, `metrics_ring_kubelet_requests_total{outcome="timeout"}`},
		freshness:  "metrics_ring_storage_freshness_seconds",
		profiles:   true, watches: true,
	}
}

// baselineRing is another metrics-ring binary, e.g. the previous code, run beside this repository's for ratios.
func baselineRing(bin string) target {
	t := metricsRing(bin)
	t.name, t.service, t.ip, t.profiles = "baseline "+filepath.Base(bin), "metrics-ring-baseline", "127.0.0.4", false
	return t
}

// metricsServer takes the same flags (metrics-ring is a drop-in for it), so only the names differ. insecureTLS
// runs it with the kubelet flags its README's installs use (--kubelet-insecure-tls, so no certificate is
// verified) instead of the kubelets' CA, as the independent harness of issue 29 item 5 did.
func metricsServer(bin, version string, insecureTLS bool) target {
	var kubeletArgs []string
	if insecureTLS {
		kubeletArgs = []string{"--kubelet-insecure-tls", "--kubelet-use-node-status-port", "--kubelet-preferred-address-types=InternalIP"}
	}
	return target{
		kubeletArgs: kubeletArgs,
		name:        "metrics-server " + version, service: "metrics-server", ip: "127.0.0.3", binary: bin,
		collection: "metrics_server_manager_tick_duration_seconds",
		failures:   []string{`metrics_server_kubelet_request_total{success="false"}`},
		// It serves metrics.k8s.io/v1beta1 only; the benchmark's requests use v1beta1.
		apiServices: []string{"v1beta1.metrics.k8s.io"},
	}
}

// benchEnv is what every target runs against: one control plane, one simulated cluster.
type benchEnv struct {
	opts  options
	cp    *framework.ControlPlane
	api   *framework.MetricsAPI
	sim   *kubeletsim.Sim
	simCA string
	// simPids are the processes serving the simulator (and the clients), for the CPU table.
	simPids map[string]int
	client  kubernetes.Interface
	forward func(kubeletsim.Step) error // churn Steps to the other processes serving the cluster (nil: none)
	planner *kubeletsim.Planner         // plans the churn of every target's soak
}

// targetResult is everything measured of one target.
type targetResult struct {
	name                         string
	firstDirect, firstAggregated time.Duration
	firstAsked                   time.Duration // when the poll that got firstDirect's answer sent its request
	coll                         collection
	others                       map[string]float64
	peakAfterAPI                 uint64
	age                          [2]time.Duration
	latencies                    []latency
	load                         *loadResult
	readers                      *readersResult
	attacks                      []*attackResult
	pageThrough                  *pageThroughResult
	soak                         *soakResult
}

// others names the pids of the control plane's processes but except, and of the simulator's.
func (e *benchEnv) others(except *framework.Process) map[string]int {
	procs := maps.Clone(e.simPids)
	for _, p := range e.cp.Processes() {
		if pid := p.Pid(); pid != 0 && p != except {
			procs[p.Name] = pid
		}
	}
	return procs
}

// runTarget starts t behind the APIService, waits for its first complete answer, runs the phases and stops it,
// so the next target has the machine to itself.
func (e *benchEnv) runTarget(ctx context.Context, t target) (*targetResult, error) {
	o := e.opts
	r := &targetResult{name: t.name}
	if err := evictFromPageCache(t.binary); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v (its file-backed RSS may not compare)\n", t.name, err)
	}
	kubeletArgs := t.kubeletArgs
	if kubeletArgs == nil {
		kubeletArgs = framework.KubeletSourceArgs(e.simCA)
	}
	start := time.Now()
	b, err := e.api.StartBackend(ctx, framework.BackendConfig{
		Service: t.service, IP: t.ip, Resolution: o.resolution, Binary: t.binary,
		Args: append(kubeletArgs, t.args...), Env: o.serverEnv,
	})
	if err != nil {
		return nil, err
	}
	defer b.Proc.Stop(30 * time.Second)
	if err := e.api.PointAPIService(ctx, b.Service); err != nil {
		return nil, err
	}
	// An APIService whose version the server does not serve stays unavailable, and kubectl, which prefers v1,
	// would fail: gone until a server serving it points it back.
	for _, name := range framework.APIServiceNames {
		if !slices.Contains(t.apiServicesOrAll(), name) {
			if err := e.api.DeleteAPIService(ctx, name); err != nil {
				return nil, err
			}
		}
	}
	direct, err := b.BenchClient(2 * time.Minute)
	if err != nil {
		return nil, err
	}
	agg, err := e.cp.AdminHTTPClient(2 * time.Minute)
	if err != nil {
		return nil, err
	}
	wantNodes, wantPods := o.nodes, o.nodes*o.pods
	wait := max(5*time.Minute, 20*o.resolution)
	fmt.Fprintf(os.Stderr, "waiting for %s to list %d nodes and %d pods (at most %s)...\n", t.name, wantNodes, wantPods, wait)
	asked, err := waitComplete(ctx, b, direct, b.URL(), wantNodes, wantPods, o.containers, wait)
	if err != nil {
		return nil, err
	}
	r.firstDirect, r.firstAsked = time.Since(start), asked.Sub(start)
	if err := e.api.WaitAvailableOf(ctx, b, t.apiServicesOrAll(), wait); err != nil {
		return nil, err
	}
	if _, err := waitComplete(ctx, b, agg, e.cp.URL, wantNodes, wantPods, o.containers, wait); err != nil {
		return nil, err
	}
	r.firstAggregated = time.Since(start)
	fmt.Fprintf(os.Stderr, "%s: complete answer after %s (direct), %s (through kube-apiserver)\n", t.name,
		r.firstDirect.Round(time.Millisecond), r.firstAggregated.Round(time.Millisecond))
	if o.scale {
		if err := e.scalePhase(ctx, t, b, direct, agg, r); err != nil {
			return nil, err
		}
	}
	base, hc := b.URL(), b.BenchClient
	if o.loadVia == "aggregator" {
		base, hc = e.cp.URL, e.cp.AdminHTTPClient
	}
	// Readers first: their idle RSS is not the list load's leftovers.
	if o.readers && t.watches {
		if r.readers, err = runReaders(ctx, o, t, b, direct, base, hc); err != nil {
			return nil, err
		}
	}
	if o.pageThrough && t.watches {
		if r.pageThrough, err = runPageThrough(ctx, o, t, b, e.cp, direct); err != nil {
			return nil, err
		}
	}
	// The attack after the readers (its HPA clients see only its own load), before the list load.
	if o.attack && t.watches {
		for _, users := range o.attackUsers {
			a, err := runAttack(ctx, o, t, b, e.cp, direct, users)
			if err != nil {
				return nil, err
			}
			r.attacks = append(r.attacks, a)
		}
	}
	if o.load {
		if r.load, err = runLoad(ctx, o, t, b, direct, base, hc); err != nil {
			return nil, err
		}
	}
	if o.soak > 0 {
		if r.soak, err = e.runSoak(ctx, t, b, direct); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// scalePhase measures, in an order that keeps each figure clean: collection CPU with nothing else asking, then
// API latency, then freshness, then (optionally, for our server) profiles.
func (e *benchEnv) scalePhase(ctx context.Context, t target, b *framework.Backend, direct, agg *http.Client, r *targetResult) error {
	o := e.opts
	fmt.Fprintf(os.Stderr, "%s: measuring collection for %s with no API load...\n", t.name, o.measure)
	procs := e.others(b.Proc)
	var windowProfile chan error
	if t.profiles && o.cpuProfile != "" && o.cpuProfileWindow {
		url, _ := cpuProfileURL(b.URL(), o.measure)
		fmt.Fprintf(os.Stderr, "%s: CPU profile of the window into %s.window...\n", t.name, o.cpuProfile)
		windowProfile = make(chan error, 1)
		go func() { windowProfile <- saveProfile(ctx, direct, url, o.cpuProfile+".window") }()
	}
	var err error
	if r.coll, r.others, err = measureCollection(ctx, t, b, direct, o.measure, procs); err != nil {
		return err
	}
	if windowProfile != nil {
		if err := <-windowProfile; err != nil {
			return err
		}
	}
	if t.profiles && o.heapProfile != "" {
		// What RSS after the window holds; the profile after the API timings also holds the lists they left.
		fmt.Fprintf(os.Stderr, "%s: saving a heap profile into %s.window...\n", t.name, o.heapProfile)
		if err := saveProfile(ctx, direct, b.URL()+"/debug/pprof/heap", o.heapProfile+".window"); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "%s: timing %d GETs per endpoint, direct and through kube-apiserver...\n", t.name, o.requests)
	ns := e.sim.Namespaces()[0]
	paths := []struct{ name, path string }{
		{"pods, all namespaces", podsPath},
		{"pods, namespace " + ns, "/apis/metrics.k8s.io/v1beta1/namespaces/" + ns + "/pods"},
		{"nodes", nodesPath},
	}
	for _, p := range paths {
		for _, via := range []struct {
			name, base string
			hc         *http.Client
		}{{"direct", b.URL(), direct}, {"aggregator", e.cp.URL, agg}} {
			l, err := timeGets(ctx, via.hc, via.base+p.path, o.requests, 5*time.Minute)
			if err != nil {
				return fmt.Errorf("timing %s %s: %w", via.name, p.path, err)
			}
			l.endpoint, l.via = p.name, via.name
			r.latencies = append(r.latencies, l)
		}
	}
	if st, err := b.Proc.Stat(); err == nil {
		r.peakAfterAPI = st.PeakRSS
	}
	if r.age, err = servedAge(ctx, direct, b.URL()); err != nil {
		return err
	}
	if !t.profiles {
		return nil
	}
	if o.heapProfile != "" {
		fmt.Fprintf(os.Stderr, "%s: saving a heap profile into %s...\n", t.name, o.heapProfile)
		if err := saveProfile(ctx, direct, b.URL()+"/debug/pprof/heap", o.heapProfile); err != nil {
			return err
		}
	}
	if o.cpuProfile != "" {
		url, secs := cpuProfileURL(b.URL(), o.measure)
		fmt.Fprintf(os.Stderr, "%s: CPU profile of collection for %d s into %s...\n", t.name, secs, o.cpuProfile)
		if err := saveProfile(ctx, direct, url, o.cpuProfile); err != nil {
			return err
		}
	}
	return nil
}
