// Command bench-scale is metrics-ring's scale and load benchmark (issues 6 and 7): a local control plane (etcd +
// kube-apiserver on loopback), N simulated kubelets x P pods x C containers registered as real Node and Pod objects,
// and metrics-ring --source=kubelet behind the v1beta1.metrics.k8s.io APIService.
//
// The scale phase measures the time to the first complete answer, collection CPU with no API load, memory, list
// latency and bytes (direct and through the aggregator) and freshness. The load phase (-load) has many clients list
// every pod at once for a bounded time and reports errors, whether collection kept its interval, and memory. The
// reader phase (-readers, issue 14) has watchers of every pod and clients paging through every pod at once, and
// reports the events each watcher received against those due, the page-throughs, collection, and peak against idle
// RSS. With -baseline-binary=PATH (another metrics-ring, e.g. the previous code; repeatable, so one registration
// serves a bisection) and -metrics-server=VERSION (upstream metrics-server) the same phases run against them on the
// same cluster afterwards, one server at a time, so a shared, noisy machine still gives honest ratios. Results are
// printed as a table; everything started is stopped on exit, also on Ctrl-C. `make bench-scale` and `make
// bench-load` run it; neither is part of `make test`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

type options struct {
	cache, dir                       string
	nodes, pods, containers, nsCount int
	resolution, measure, settleMax   time.Duration
	requests                         int
	scale                            bool
	load                             bool
	loadClients, loadMaxRequests     int
	loadDuration                     time.Duration
	loadVia                          string
	readers                          bool
	readersWatchers, readersPagers   int
	readersPageSize, readersMaxPages int
	readersDuration                  time.Duration
	readersRSSLimit                  uint64
	metricsServer                    string
	baselines                        []string
	serverEnv                        []string // KEY=VALUE added to each server's environment (-server-env)
	cpuProfile, heapProfile          string
	cpuProfileWindow                 bool
	keep                             bool
	simProcesses, simPortBase        int
	simShard                         int    // >= 0 in a simulator child process only
	simCABundle                      string // the child's CA bundle file
	attackOptions
	soakOptions
}

func main() {
	var o options
	flag.StringVar(&o.cache, "cache-dir", framework.DefaultCacheDir(), "where built tools are kept, by version")
	flag.StringVar(&o.dir, "dir", "", "folder for this run's certificates, kubeconfig and logs (default: a new temporary folder)")
	flag.IntVar(&o.nodes, "nodes", 1000, "simulated nodes")
	flag.IntVar(&o.pods, "pods", 30, "pods per node (the mean, with -spread)")
	flag.IntVar(&o.containers, "containers", 2, "containers per pod")
	flag.IntVar(&o.nsCount, "namespaces", 10, "namespaces the pods are spread over")
	flag.DurationVar(&o.resolution, "resolution", 15*time.Second, "--metric-resolution of the servers under test")
	flag.BoolVar(&o.scale, "scale", true, "run the scale phase: collection CPU, memory, latency and bytes of each list, freshness")
	flag.DurationVar(&o.settleMax, "settle-max", 3*time.Minute, "before each server starts, wait up to this long for the control plane and the simulator to use less than 0.3 cores together (0: do not wait)")
	flag.DurationVar(&o.measure, "measure", 60*time.Second, "window over which collection CPU is measured (no API load)")
	flag.IntVar(&o.requests, "requests", 50, "sequential GETs per measured endpoint and path (each path also stops after 5 minutes)")
	flag.BoolVar(&o.load, "load", false, "run the load phase: -load-clients clients list every pod for -load-duration")
	flag.IntVar(&o.loadClients, "load-clients", 200, "concurrent clients in the load phase, each on its own connection")
	flag.DurationVar(&o.loadDuration, "load-duration", 60*time.Second, "how long the load phase issues requests")
	flag.IntVar(&o.loadMaxRequests, "load-max-requests", 100000, "upper bound on requests in the load phase")
	flag.StringVar(&o.loadVia, "load-via", "direct", "where load-phase clients send requests: direct or aggregator")
	flag.BoolVar(&o.readers, "readers", false, "run the reader phase: -readers-watchers clients watch every pod and -readers-pagers page through every pod for -readers-duration")
	flag.IntVar(&o.readersWatchers, "readers-watchers", 100, "watchers of every pod in the reader phase, each on its own connection")
	flag.IntVar(&o.readersPagers, "readers-pagers", 20, "clients paging through every pod in the reader phase, each on its own connection")
	flag.IntVar(&o.readersPageSize, "readers-page-size", 10, "limit of each page in the reader phase")
	flag.DurationVar(&o.readersDuration, "readers-duration", 60*time.Second, "how long the reader phase runs (the watchers then get one -resolution more to receive the last collection)")
	flag.IntVar(&o.readersMaxPages, "readers-max-pages", 1000000, "upper bound on pages requested in the reader phase")
	flag.Uint64Var(&o.readersRSSLimit, "readers-rss-limit", 4<<30, "stop the reader phase at once when the server's RSS passes this many bytes (the machine is shared)")
	flag.Func("baseline-binary", "also run the phases against this metrics-ring binary (e.g. the previous code, built with go build -o PATH ./cmd/metrics-ring) on the same cluster, after this repository's, for ratios; repeatable (one after the other, in the order given, each named by its file name)", func(v string) error {
		o.baselines = append(o.baselines, v)
		return nil
	})
	flag.Func("server-env", "add KEY=VALUE to the environment of each server under test (metrics-ring, a baseline, metrics-server) and of no other process, e.g. GODEBUG=memprofilerate=8192 for heap profiles that sample finely without slowing the control plane; repeatable", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		o.serverEnv = append(o.serverEnv, v)
		return nil
	})
	flag.StringVar(&o.metricsServer, "metrics-server", "", "also run the phases against this metrics-server version (e.g. v0.9.0, built once from its module) on the same cluster, for ratios")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "save a CPU profile of metrics-ring to this file: while collecting (one -measure long) after the scale phase, and during the load phase as FILE.load")
	flag.BoolVar(&o.cpuProfileWindow, "cpuprofile-window", false, "with -cpuprofile, also profile metrics-ring during the collection window itself, into FILE.window (the profiler's own cost then counts in the window's CPU)")
	flag.StringVar(&o.heapProfile, "heapprofile", "", "save a heap profile of metrics-ring to this file after the scale phase, and to FILE.window after the collection window (before the API timings)")
	flag.BoolVar(&o.keep, "keep", false, "keep the run folder (logs, certificates) after exit")
	flag.IntVar(&o.simProcesses, "sim-processes", -1, fmt.Sprintf("processes serving the simulated kubelets (-1: one per %d nodes; 0: inside this process, sharing its CPU and open-file limit with the load clients)", nodesPerSimProcess))
	flag.IntVar(&o.simPortBase, "sim-port-base", 20000, "with -sim-processes > 0, node i listens on 127.0.0.1:BASE+i (keep the range below the ephemeral ports)")
	flag.IntVar(&o.simShard, "sim-shard", -1, "internal: serve this shard of the simulated kubelets and nothing else (how the benchmark runs its simulator processes)")
	flag.StringVar(&o.simCABundle, "sim-ca-bundle", "", "internal: the CA bundle a -sim-shard process signs with")
	o.attackOptions.flags()
	o.soakOptions.flags()
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.completeSpread(set)
	if o.simProcesses < 0 {
		o.simProcesses = simProcessesFor(o.nodes)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.attackShard {
		if err := serveAttackShard(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "bench-scale: attacking process: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if o.simShard >= 0 {
		if err := serveSimShard(ctx, o); err != nil {
			fmt.Fprintf(os.Stderr, "bench-scale: simulator shard %d: %v\n", o.simShard, err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, o); err != nil {
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted; everything started was stopped")
		}
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		stop()
		os.Exit(1)
	}
}

func (o options) validate() error {
	if o.nodes < 1 || o.pods < 1 || o.containers < 1 || o.nsCount < 1 {
		return fmt.Errorf("-nodes, -pods, -containers and -namespaces must be at least 1")
	}
	if o.resolution < time.Second || o.measure < o.resolution || o.requests < 1 {
		return fmt.Errorf("need -resolution >= 1s, -measure >= -resolution and -requests >= 1")
	}
	if !o.scale && !o.load && !o.readers && !o.attack && !o.pageThrough && o.soak == 0 {
		return fmt.Errorf("nothing to do: -scale, -load, -readers, -attack, -page-through and -soak are all off")
	}
	if err := o.validateAttack(); err != nil {
		return err
	}
	if err := o.validateSoak(); err != nil {
		return err
	}
	if o.simProcesses > 0 && (o.simPortBase < 1024 || o.simPortBase+o.nodes > 65536) {
		return fmt.Errorf("-sim-port-base %d does not leave room for %d node ports", o.simPortBase, o.nodes)
	}
	if o.load && (o.loadClients < 1 || o.loadDuration < time.Second || o.loadMaxRequests < 1) {
		return fmt.Errorf("need -load-clients >= 1, -load-duration >= 1s and -load-max-requests >= 1")
	}
	if o.readers && (o.readersWatchers < 0 || o.readersPagers < 0 || o.readersWatchers+o.readersPagers < 1 ||
		o.readersPageSize < 1 || o.readersDuration < time.Second || o.readersMaxPages < 1 || o.readersRSSLimit < 1<<20) {
		return fmt.Errorf("need -readers-watchers and -readers-pagers >= 0 (not both 0), -readers-page-size >= 1, " +
			"-readers-duration >= 1s, -readers-max-pages >= 1 and -readers-rss-limit >= 1 MiB")
	}
	names := map[string]bool{}
	for _, b := range o.baselines {
		if st, err := os.Stat(b); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("-baseline-binary %q is not an executable file (%v)", b, err)
		}
		if names[filepath.Base(b)] {
			return fmt.Errorf("-baseline-binary %q: another has the file name %q, which names its results", b, filepath.Base(b))
		}
		names[filepath.Base(b)] = true
	}
	// metrics-server panics on a resolution under 10s or not above its 10s kubelet request timeout.
	if o.metricsServer != "" && o.resolution <= 10*time.Second {
		return fmt.Errorf("metrics-server needs a -resolution over 10s (got %s)", o.resolution)
	}
	if o.loadVia != "direct" && o.loadVia != "aggregator" {
		return fmt.Errorf("-load-via is direct or aggregator, not %q", o.loadVia)
	}
	return nil
}

func run(ctx context.Context, o options) (err error) {
	if err := o.validate(); err != nil {
		return err
	}
	// Everything the benchmark does is bounded: registration, waits and measurements all fit in this.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Hour)
	defer cancel()
	raiseOpenFiles(os.Stderr, o.nodes)
	tools, err := framework.EnsureTools(o.cache, os.Stderr)
	if err != nil {
		return err
	}
	targets := []target{metricsRing(tools.MetricsRing)}
	for _, b := range o.baselines {
		targets = append(targets, baselineRing(b))
	}
	if o.metricsServer != "" {
		bin, err := framework.BuildMetricsServer(o.cache, o.metricsServer, os.Stderr)
		if err != nil {
			return err
		}
		targets = append(targets, metricsServer(bin, o.metricsServer, o.msInsecureTLS))
	}
	if o.dir == "" {
		if o.dir, err = os.MkdirTemp("", "metrics-ring-bench-"); err != nil {
			return err
		}
	}
	defer func() {
		if o.keep || err != nil {
			fmt.Fprintf(os.Stderr, "logs kept in %s\n", o.dir)
			return
		}
		os.RemoveAll(o.dir)
	}()
	cp, err := framework.Start(ctx, framework.Options{Tools: tools, Dir: o.dir, Out: os.Stderr,
		// Registration runs 32 writers and the load phase up to hundreds of readers through the aggregator; the
		// defaults (400/200) would make the benchmark measure kube-apiserver's throttling instead. And no etcd
		// compaction (every 5 minutes by default): compacting the registration's 300,000 pod revisions at 10,000
		// nodes kept etcd and kube-apiserver busy (9 and 19 CPU-s a minute) through one server's window and cold
		// start and not the other's.
		ExtraAPIServerArgs: []string{"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
			"--etcd-compaction-interval=0"}})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && !errors.Is(err, context.Canceled) {
			cp.DumpLogs(os.Stderr, 20)
		}
		fmt.Fprintln(os.Stderr, "stopping...")
		cp.Stop()
	}()

	sim, err := kubeletsim.New(o.simConfig())
	if err != nil {
		return fmt.Errorf("creating simulator: %w", err)
	}
	simPids := map[string]int{"bench-scale (simulator)": os.Getpid()}
	var forward func(kubeletsim.Step) error // churn Steps to the processes serving the cluster
	if o.simProcesses == 0 {
		if err := sim.Start(ctx); err != nil {
			return fmt.Errorf("starting simulator: %w", err)
		}
		defer sim.Stop()
	} else {
		// This process keeps the model (to register it); the children serve it.
		shards, err := startSimShards(ctx, o, sim)
		if err != nil {
			return err
		}
		defer shards.stop()
		forward = shards.forward
		simPids = shards.pids()
		simPids["bench-scale (clients)"] = os.Getpid()
	}
	r := &result{opts: o}
	c, err := fastClient(cp)
	if err != nil {
		return err
	}
	if r.registration, err = registerCluster(ctx, cp, c, sim, o); err != nil {
		return err
	}
	simCA := filepath.Join(o.dir, "kubelet-ca.crt")
	if err := os.WriteFile(simCA, sim.CACertPEM(), 0o600); err != nil {
		return err
	}
	api, err := cp.SetupMetricsAPI(ctx)
	if err != nil {
		return err
	}
	env := &benchEnv{opts: o, cp: cp, api: api, sim: sim, simCA: simCA, simPids: simPids, client: c, forward: forward,
		planner: sim.NewPlanner(o.churnSeed)}
	for _, t := range targets {
		waitQuiet(ctx, os.Stderr, env.others(nil), o.settleMax)
		tr, err := env.runTarget(ctx, t)
		if err != nil {
			// What the earlier targets measured is still worth printing.
			if len(r.targets) > 0 {
				r.print(os.Stdout)
			}
			return fmt.Errorf("%s: %w", t.name, err)
		}
		r.targets = append(r.targets, tr)
	}
	r.print(os.Stdout)
	if err := r.writeSoakPlot(); err != nil {
		return err
	}
	return r.writeSoakSamples()
}
