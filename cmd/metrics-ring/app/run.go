package app

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	_ "k8s.io/component-base/metrics/prometheus/restclient" // client-go metrics on /metrics
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/adapter"
	"github.com/metrics-ring/metrics-ring/pkg/api"
	"github.com/metrics-ring/metrics-ring/pkg/collect"
	"github.com/metrics-ring/metrics-ring/pkg/scraper"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
	"github.com/metrics-ring/metrics-ring/pkg/version"
)

// Run wires and runs metrics-ring until ctx is done: informers (nodes; Running pods, trimmed), storage, the
// source (kubelet scraper or Prometheus adapter) and its collection loop (started once the informers have synced),
// and the API server (serving at once, with /readyz failing until the first collection cycle has finished).
func Run(ctx context.Context, o *Options) error {
	gcPercent := setGCPercent()
	klog.InfoS("Starting metrics-ring", "version", version.Version, "commit", version.Commit, "source", o.Source,
		"resolution", o.MetricResolution, "window", o.Window, "staleAfter", o.StaleAfter, "history", o.History,
		"gcPercent", gcPercent)
	restConfig, err := o.restConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	w, err := Wire(o, client, restConfig)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// Wired is the assembled process, before it runs.
type Wired struct {
	Server  *genericapiserver.GenericAPIServer
	Storage *storage.Storage
	Loop    *collect.Loop
	start   func(stop <-chan struct{})
	synced  []cache.InformerSynced
	// warm says when the loop may warm its source (Loop.Start, whose Warm decides whether it does): once nodes synced.
	warm cache.InformerSynced
}

// Wire builds informers, storage, source, loop and server from o and the given clients; tests pass fakes.
func Wire(o *Options, client kubernetes.Interface, restConfig *rest.Config) (*Wired, error) {
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := factory.Core().V1().Nodes()
	nodeInformer := nodes.Informer()
	if err := nodeInformer.SetTransform(trimNode); err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	store := storage.New(storage.Options{
		Source:     o.Source,
		History:    o.History,
		Resolution: o.MetricResolution,
		Window:     o.Window,
		StaleAfter: o.StaleAfter,
	})
	// The collection waits for the bindings to have seen every pod of the initial list (pods.HasSynced), not only
	// for the informer's cache: a handler's events are delivered after the cache is filled, and a pod not yet bound
	// when its node is first scraped loses that sample, so that the first complete answer took a cycle more whenever
	// the first cycle outran the handler (BENCHMARKS.md, "Figures behind the comments").
	podFactory, podInformer, pods, err := runningPods(client, podBindings(store))
	if err != nil {
		return nil, err
	}
	if _, err := nodeInformer.AddEventHandler(nodeCapacities(store)); err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	so, err := o.Kubelet.ScraperOptions(restConfig)
	if err != nil {
		return nil, err
	}
	src, err := newSource(o, so, nodes.Lister())
	if err != nil {
		return nil, err
	}
	loop, err := collect.New(src, store, collect.Options{Source: o.Source, Resolution: o.MetricResolution})
	if err != nil {
		return nil, err
	}

	cfg, err := o.Server.Config(version.Version)
	if err != nil {
		return nil, err
	}
	synced := []cache.InformerSynced{nodeInformer.HasSynced, podInformer.HasSynced, pods.HasSynced}
	srv, err := api.NewServer(cfg, api.Deps{
		Snapshots:         store,
		Nodes:             nodes.Lister(),
		Pods:              pods,
		NodeSelector:      requirements(so),
		InformersSynced:   func() bool { return nodeInformer.HasSynced() && podInformer.HasSynced() && pods.HasSynced() },
		Collection:        loop,
		MaxWatches:        o.MaxWatches,
		MaxWatchesPerUser: o.MaxWatchesPerUser,
		ReaderCacheBytes:  readerCacheBytes(o.ReaderCacheBytes, cgroupLimitFiles),
		AnswerBytes:       answerBytes(o.AnswerBytes, cgroupLimitFiles),
	})
	if err != nil {
		return nil, err
	}
	return &Wired{
		Server:  srv,
		Storage: store,
		Loop:    loop,
		start: func(stop <-chan struct{}) {
			factory.Start(stop)
			podFactory.Start(stop)
		},
		synced: synced,
		warm:   nodeInformer.HasSynced,
	}, nil
}

// The kubelet source is warmed before the first cycle (collect.Warmer); the Prometheus source is not.
var _ collect.Warmer = (*scraper.Scraper)(nil)

// Run starts the informers and the collection loop (Loop.Start: it warms the source once the nodes are known and
// runs its cycles once every informer has synced), and serves until ctx is done (SIGTERM). Then
// /readyz fails at once, the server goes on serving for --shutdown-delay-duration so that endpoints drain, ends
// the watches and returns; the informers and the source run until then, so what is served stays fresh.
func (w *Wired) Run(ctx context.Context) error {
	background, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	w.start(background.Done())
	go returnStartupMemory(background, w.Storage.Latest().Changed())
	go w.Loop.Start(background, w.warm, w.synced...)
	return w.Server.PrepareRun().RunWithContext(ctx)
}

// newSource builds the --source's collector.
func newSource(o *Options, so scraper.Options, nodes scraper.NodeLister) (collect.Source, error) {
	if o.Source == SourcePrometheus {
		ao, err := o.Prometheus.adapterOptions()
		if err != nil {
			return nil, err
		}
		a, err := adapter.New(ao)
		if err != nil {
			return nil, fmt.Errorf("building the Prometheus source: %w", err)
		}
		return a, nil
	}
	s, err := scraper.New(so, nodes)
	if err != nil {
		return nil, fmt.Errorf("building the kubelet scraper: %w", err)
	}
	return s, nil
}

// requirements are the --node-selector's, so the API serves the nodes the scraper scrapes.
func requirements(so scraper.Options) labels.Requirements {
	if so.NodeSelector == nil {
		return nil
	}
	reqs, _ := so.NodeSelector.Requirements()
	return reqs
}
