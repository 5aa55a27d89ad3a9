package app

import (
	"fmt"
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
	BasicUser    string
	BasicPWFile  string
	CAFile       string
	ClientCert   string
	ClientKey    string
	InsecureTLS  bool
	Headers      []string
	Verb         string
	QueryTimeout time.Duration
	MaxResponse  int64 // bytes
}

// NewPrometheusOptions returns the defaults, the adapter's.
func NewPrometheusOptions() *PrometheusOptions {
	d := adapter.DefaultClientOptions()
	return &PrometheusOptions{Verb: d.Method, QueryTimeout: d.Timeout, MaxResponse: d.MaxResponseBytes}
}

// AddFlags adds the Prometheus source's flags.
func (o *PrometheusOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "prometheus-url", o.URL, "With --source=prometheus: the Prometheus-compatible HTTP API to query, e.g. http://prometheus-k8s.monitoring.svc:9090.")
	fs.StringVar(&o.ConfigFile, "prometheus-config", o.ConfigFile, "prometheus-adapter configuration file whose resourceRules say how to query CPU and memory (its ConfigMap manifest works too); empty: the defaults, reading the kubelet's /metrics/resource series.")
	fs.StringVar(&o.TokenFile, "prometheus-token-file", o.TokenFile, "File holding the bearer token sent to Prometheus, read on every request.")
	fs.StringVar(&o.BasicUser, "prometheus-basic-auth-username", o.BasicUser, "User name of the basic auth sent to Prometheus, with --prometheus-basic-auth-password-file. Credentials in --prometheus-url are sent as basic auth too, but a file keeps them out of the Deployment.")
	fs.StringVar(&o.BasicPWFile, "prometheus-basic-auth-password-file", o.BasicPWFile, "File holding the basic auth password sent to Prometheus, read on every request.")
	fs.StringVar(&o.CAFile, "prometheus-ca-file", o.CAFile, "CA bundle to verify Prometheus' serving certificate.")
	fs.StringVar(&o.ClientCert, "prometheus-client-tls-cert-file", o.ClientCert, "Client certificate for Prometheus.")
	fs.StringVar(&o.ClientKey, "prometheus-client-tls-key-file", o.ClientKey, "Client key for Prometheus.")
	fs.BoolVar(&o.InsecureTLS, "prometheus-insecure-skip-tls-verify", o.InsecureTLS, "Do not verify Prometheus' serving certificate. For tests only.")
	fs.StringArrayVar(&o.Headers, "prometheus-header", o.Headers, "Header sent with every request to Prometheus, as Name=value (repeatable), e.g. X-Scope-OrgID=team-a.")
	fs.StringVar(&o.Verb, "prometheus-verb", o.Verb, "HTTP method of queries: GET or POST.")
	fs.Int64Var(&o.MaxResponse, "prometheus-max-response-bytes", o.MaxResponse, "Largest response to one query, in bytes; a larger one fails that query (it is decoded as it arrives, so memory follows the series, not this cap). The default holds about 500,000 series.")
	fs.DurationVar(&o.QueryTimeout, "prometheus-query-timeout", o.QueryTimeout, "Timeout of each query, also sent as Prometheus' own timeout parameter (default 10s, or 90% of a shorter --metric-resolution).")
}

// validate checks the flags that are needed with --source=prometheus. The adapter's ClientOptions own the checks
// and their messages, so the flags are checked as the options they make.
func (o *PrometheusOptions) validate() []error {
	return validateAs(o.adapterOptions())
}

func (o *PrometheusOptions) headers() (map[string]string, error) {
	out := map[string]string{}
	for i, h := range o.Headers {
		name, value, ok := strings.Cut(h, "=")
		if !ok || strings.TrimSpace(name) == "" {
			// Not quoted: a header is where a token goes, and "Authorization: Bearer ..." has no '='.
			return nil, fmt.Errorf("--prometheus-header number %d (not shown: it may hold credentials): want Name=value", i+1)
		}
		out[strings.TrimSpace(name)] = value
	}
	return out, nil
}

// adapterOptions builds the Prometheus source's options; the error is an invalid --prometheus-header.
func (o *PrometheusOptions) adapterOptions() (adapter.Options, error) {
	headers, err := o.headers()
	return adapter.Options{
		ClientOptions: adapter.ClientOptions{URL: o.URL, BearerTokenFile: o.TokenFile,
			BasicAuthUsername: o.BasicUser, BasicAuthPasswordFile: o.BasicPWFile, CAFile: o.CAFile,
			CertFile: o.ClientCert, KeyFile: o.ClientKey, InsecureSkipVerify: o.InsecureTLS, Headers: headers,
			Method: o.Verb, Timeout: o.QueryTimeout, MaxResponseBytes: o.MaxResponse},
		ConfigFile: o.ConfigFile,
	}, err
}
