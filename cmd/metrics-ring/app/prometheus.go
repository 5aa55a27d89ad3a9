package app

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/metrics-ring/metrics-ring/pkg/adapter"
)

// PrometheusOptions are the Prometheus source's flags, named as prometheus-adapter v0.12 names them where it has
// them, so an operator's flags carry over.
type PrometheusOptions struct {
	URL          string
	ConfigFile   string
	TokenFile    string
	CAFile       string
	ClientCert   string
	ClientKey    string
	InsecureTLS  bool
	Headers      []string
	Verb         string
	QueryTimeout time.Duration
	MaxResponse  int64 // bytes
}

// NewPrometheusOptions returns the defaults.
func NewPrometheusOptions() *PrometheusOptions {
	return &PrometheusOptions{Verb: http.MethodGet, QueryTimeout: 10 * time.Second,
		MaxResponse: adapter.DefaultMaxResponseBytes}
}

// AddFlags adds the Prometheus source's flags.
func (o *PrometheusOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "prometheus-url", o.URL, "With --source=prometheus: the Prometheus-compatible HTTP API to query, e.g. http://prometheus-k8s.monitoring.svc:9090.")
	fs.StringVar(&o.ConfigFile, "prometheus-config", o.ConfigFile, "prometheus-adapter configuration file whose resourceRules say how to query CPU and memory (its ConfigMap manifest works too); empty: the defaults, reading the kubelet's /metrics/resource series.")
	fs.StringVar(&o.TokenFile, "prometheus-token-file", o.TokenFile, "File holding the bearer token sent to Prometheus, read on every request.")
	fs.StringVar(&o.CAFile, "prometheus-ca-file", o.CAFile, "CA bundle to verify Prometheus' serving certificate.")
	fs.StringVar(&o.ClientCert, "prometheus-client-tls-cert-file", o.ClientCert, "Client certificate for Prometheus.")
	fs.StringVar(&o.ClientKey, "prometheus-client-tls-key-file", o.ClientKey, "Client key for Prometheus.")
	fs.BoolVar(&o.InsecureTLS, "prometheus-insecure-skip-tls-verify", o.InsecureTLS, "Do not verify Prometheus' serving certificate. For tests only.")
	fs.StringArrayVar(&o.Headers, "prometheus-header", o.Headers, "Header sent with every request to Prometheus, as Name=value (repeatable), e.g. X-Scope-OrgID=team-a.")
	fs.StringVar(&o.Verb, "prometheus-verb", o.Verb, "HTTP method of queries: GET or POST.")
	fs.Int64Var(&o.MaxResponse, "prometheus-max-response-bytes", o.MaxResponse, "Largest response to one query, in bytes; a larger one fails that query (it is decoded as it arrives, so memory follows the series, not this cap). The default holds about 500,000 series.")
	fs.DurationVar(&o.QueryTimeout, "prometheus-query-timeout", o.QueryTimeout, "Timeout of each query, also sent as Prometheus' own timeout parameter (default 10s, or 90% of a shorter --metric-resolution).")
}

// complete fits the query timeout inside a short resolution unless it was given, as for kubelets.
func (o *PrometheusOptions) complete(resolution time.Duration, changed func(string) bool) {
	if limit := resolution * 9 / 10; !changed("prometheus-query-timeout") && limit > 0 && o.QueryTimeout > limit {
		o.QueryTimeout = limit
	}
}

// validate checks the flags that are needed with --source=prometheus.
func (o *PrometheusOptions) validate() []error {
	var errs []error
	if o.URL == "" {
		errs = append(errs, errors.New("--source=prometheus needs --prometheus-url"))
	}
	if (o.ClientCert == "") != (o.ClientKey == "") {
		errs = append(errs, errors.New("--prometheus-client-tls-cert-file and --prometheus-client-tls-key-file go together"))
	}
	if o.QueryTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--prometheus-query-timeout=%v must be positive", o.QueryTimeout))
	}
	if o.MaxResponse <= 0 {
		errs = append(errs, fmt.Errorf("--prometheus-max-response-bytes=%d must be positive", o.MaxResponse))
	}
	if _, err := o.headers(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func (o *PrometheusOptions) headers() (map[string]string, error) {
	out := map[string]string{}
	for _, h := range o.Headers {
		name, value, ok := strings.Cut(h, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("--prometheus-header %q: want Name=value", h)
		}
		out[strings.TrimSpace(name)] = value
	}
	return out, nil
}

// adapterOptions builds the Prometheus source's options.
func (o *PrometheusOptions) adapterOptions() (adapter.Options, error) {
	headers, err := o.headers()
	if err != nil {
		return adapter.Options{}, err
	}
	return adapter.Options{
		ClientOptions: adapter.ClientOptions{URL: o.URL, BearerTokenFile: o.TokenFile, CAFile: o.CAFile,
			CertFile: o.ClientCert, KeyFile: o.ClientKey, InsecureSkipVerify: o.InsecureTLS, Headers: headers,
			Method: o.Verb, Timeout: o.QueryTimeout, MaxResponseBytes: o.MaxResponse},
		ConfigFile: o.ConfigFile,
	}, nil
}
