package app

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as in metrics-server
	"k8s.io/component-base/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/api"
	"github.com/metrics-ring/metrics-ring/pkg/collect"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Source names accepted by --source.
const (
	SourceKubelet    = "kubelet"
	SourcePrometheus = "prometheus"
)

// Options are all of metrics-ring's flags.
type Options struct {
	Server     *api.ServerOptions
	Kubelet    *KubeletOptions
	Prometheus *PrometheusOptions
	Logging    *logs.Options
	Metrics    *metrics.Options

	Kubeconfig       string
	MetricResolution time.Duration
	ShowVersion      bool

	// metrics-ring's own.
	Source            string
	History           int
	Window            time.Duration // 0: one resolution
	StaleAfter        time.Duration // 0: three resolutions
	MaxWatches        int
	MaxWatchesPerUser int
	ReaderCacheBytes  int64 // 0: a part of the memory limit (readerCacheBytes)
	AnswerBytes       int64 // 0: a part of the memory limit (answerBytes)
}

// NewOptions returns the defaults of DESIGN.md section 2.
func NewOptions() *Options {
	return &Options{
		Server:            api.NewServerOptions(),
		Kubelet:           NewKubeletOptions(),
		Prometheus:        NewPrometheusOptions(),
		Logging:           logs.NewOptions(),
		Metrics:           metrics.NewOptions(),
		MetricResolution:  storage.DefaultResolution,
		Source:            SourceKubelet,
		History:           storage.DefaultHistory,
		MaxWatches:        api.DefaultMaxWatches,
		MaxWatchesPerUser: api.DefaultMaxWatchesPerUser,
	}
}

// Flags returns the flags in metrics-server's groups, plus a "metrics-ring" group for ours.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("metrics server")
	fs.DurationVar(&o.MetricResolution, "metric-resolution", o.MetricResolution, "The resolution at which metrics are collected and retained (1s or more).")
	fs.BoolVar(&o.ShowVersion, "version", false, "Show version and commit, then exit")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "The path to the kubeconfig used to connect to the Kubernetes API server and the Kubelets (defaults to in-cluster config)")

	ours := fss.FlagSet("metrics-ring")
	ours.StringVar(&o.Source, "source", o.Source, "Where metrics come from: kubelet (scrape every kubelet's /metrics/resource, like metrics-server) or prometheus (query a Prometheus-compatible API with PromQL, like prometheus-adapter's resourceRules).")
	ours.IntVar(&o.History, "history", o.History, "Samples kept per node and container series (2 or more).")
	ours.DurationVar(&o.Window, "window", o.Window, "Window CPU usage is averaged over (default: one --metric-resolution).")
	ours.DurationVar(&o.StaleAfter, "stale-after", o.StaleAfter, "Age after which a node's or pod's last value is no longer served, and after which no successful collection means 503 (default: three --metric-resolution).")

	ours.IntVar(&o.MaxWatches, "max-watches", o.MaxWatches, "Watches on NodeMetrics and PodMetrics open at once; beyond it a watch gets 429 Too Many Requests.")
	ours.IntVar(&o.MaxWatchesPerUser, "max-watches-per-user", o.MaxWatchesPerUser, "Watches one user may have open at once (0: no per-user limit); beyond it a watch gets 429 Too Many Requests.")

	ours.Int64Var(&o.ReaderCacheBytes, "reader-cache-bytes", o.ReaderCacheBytes, "Bytes that lists, pages and watch feeds built for readers may keep between requests, shared fairly between users (a user's watches end with 410 Gone when it is over its share) (0: a sixteenth of the memory limit, GOMEMLIMIT or the container's, else 64 MiB). Answers nothing keeps are bounded by --answer-bytes.")
	ours.Int64Var(&o.AnswerBytes, "answer-bytes", o.AnswerBytes, "Bytes that large answers nothing keeps (a list, page or table made for one request) may hold while they are made and written; one user takes at most a quarter, answers under 64 KiB take nothing; a request finding no room waits up to 5 s, then gets 429 Too Many Requests (0: an eighth of the memory limit, GOMEMLIMIT or the container's, else 128 MiB).")

	o.Server.AddFlags(&fss)
	o.Kubelet.AddFlags(fss.FlagSet("kubelet client"))
	o.Prometheus.AddFlags(fss.FlagSet("prometheus source"))
	o.Metrics.AddFlags(fss.FlagSet("metrics"))
	logsapi.AddFlags(o.Logging, fss.FlagSet("logging"))
	return fss
}

// Complete fills in defaults that depend on other flags. changed reports whether a flag was given.
func (o *Options) Complete(changed func(name string) bool) {
	if o.Window == 0 {
		o.Window = storage.DefaultWindow(o.MetricResolution)
	}
	if o.StaleAfter == 0 {
		o.StaleAfter = storage.DefaultStaleAfter(o.MetricResolution)
	}
	// The collection loop owns the cadence: a default timeout shrinks to fit a short resolution.
	o.Kubelet.RequestTimeout = collect.FitTimeout(o.Kubelet.RequestTimeout, o.MetricResolution,
		changed("kubelet-request-timeout"))
	o.Prometheus.QueryTimeout = collect.FitTimeout(o.Prometheus.QueryTimeout, o.MetricResolution,
		changed("prometheus-query-timeout"))
}

// Validate reports every invalid flag.
func (o *Options) Validate() []error {
	var errs []error
	switch o.Source {
	case SourceKubelet:
	case SourcePrometheus:
		errs = append(errs, o.Prometheus.validate()...)
	default:
		errs = append(errs, fmt.Errorf("--source=%q is unknown: use kubelet or prometheus", o.Source))
	}
	if o.MetricResolution < time.Second {
		errs = append(errs, fmt.Errorf("metric-resolution should be a time duration at least 1s, but value %v provided", o.MetricResolution))
	}
	if collect.MaxTimeout(o.MetricResolution) < o.Kubelet.RequestTimeout {
		errs = append(errs, fmt.Errorf("metric-resolution should be larger than kubelet-request-timeout, but metric-resolution value %v kubelet-request-timeout value %v provided", o.MetricResolution, o.Kubelet.RequestTimeout))
	}
	if o.History < storage.MinHistory {
		errs = append(errs, fmt.Errorf("--history=%d: at least %d samples are needed for a CPU rate", o.History, storage.MinHistory))
	}
	if o.Window < 0 {
		errs = append(errs, fmt.Errorf("--window=%v must be positive", o.Window))
	}
	if o.MaxWatches < 1 {
		errs = append(errs, fmt.Errorf("--max-watches=%d must be at least 1", o.MaxWatches))
	}
	if o.ReaderCacheBytes < 0 {
		errs = append(errs, fmt.Errorf("--reader-cache-bytes=%d must be 0 (a part of the memory limit) or more", o.ReaderCacheBytes))
	}
	if o.AnswerBytes < 0 {
		errs = append(errs, fmt.Errorf("--answer-bytes=%d must be 0 (a part of the memory limit) or more", o.AnswerBytes))
	}
	if o.MaxWatchesPerUser < 0 {
		errs = append(errs, fmt.Errorf("--max-watches-per-user=%d must be 0 (no per-user limit) or more", o.MaxWatchesPerUser))
	}
	if o.StaleAfter < 0 {
		errs = append(errs, fmt.Errorf("--stale-after=%v must be positive", o.StaleAfter))
	}
	errs = append(errs, o.Kubelet.Validate()...)
	errs = append(errs, o.Metrics.Validate()...)
	if fieldErrs := logsapi.Validate(o.Logging, nil, nil); len(fieldErrs) > 0 {
		errs = append(errs, fieldErrs.ToAggregate())
	}
	errs = append(errs, o.Server.Validate()...)
	return errs
}

// validateAs checks flags as the options they make: a source's options own their checks and messages. mapErr is
// a flag that did not parse into them.
func validateAs[T interface{ Validate() []error }](opts T, mapErr error) []error {
	errs := opts.Validate()
	if mapErr != nil {
		errs = append(errs, mapErr)
	}
	return errs
}

// restConfig is the client config for the informers and, by default, the kubelets.
func (o *Options) restConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" {
		loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig}, &clientcmd.ConfigOverrides{})
		cfg, err = loader.ClientConfig()
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client config (--kubeconfig %q): %w", o.Kubeconfig, err)
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	if err := rest.SetKubernetesDefaults(cfg); err != nil {
		return nil, fmt.Errorf("defaulting the Kubernetes client config: %w", err)
	}
	return cfg, nil
}

// flagChanged adapts a pflag.FlagSet to Complete's changed.
func flagChanged(fs *pflag.FlagSet) func(string) bool {
	return func(name string) bool { return fs.Changed(name) }
}
