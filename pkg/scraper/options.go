package scraper

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// Defaults of the kubelet flags, following metrics-server's manifests (DESIGN.md section 2). DefaultOptions gathers
// them; New fills in zero-valued Options from it.
const (
	defaultTimeout          = 10 * time.Second
	defaultConcurrency      = 50
	defaultMaxResponseBytes = 10 << 20
	defaultPort             = 10250
	defaultScheme           = "https"
	defaultConnMaxAge       = 10 * time.Minute
)

// defaultAddressTypes is the default --kubelet-preferred-address-types.
var defaultAddressTypes = []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName}

// Options configure a Scraper. Zero values take the defaults of DefaultOptions (Compression's zero is off,
// ConnMaxAge's keeps connections for as long as they live).
type Options struct {
	Timeout               time.Duration            // --kubelet-request-timeout (default 10s); per request
	Concurrency           int                      // concurrent scrapes at least (default 50); more for large clusters (pace.go)
	MaxResponseBytes      int64                    // response-size cap (default 10 MiB)
	PreferredAddressTypes []corev1.NodeAddressType // default InternalIP,ExternalIP,Hostname
	Port                  int                      // --kubelet-port (default 10250)
	UseNodeStatusPort     bool                     // --kubelet-use-node-status-port
	Scheme                string                   // "https" (default) or "http" (--deprecated-kubelet-completely-insecure)
	InsecureTLS           bool                     // --kubelet-insecure-tls
	CAFile                string                   // --kubelet-certificate-authority
	ClientCertFile        string                   // --kubelet-client-certificate
	ClientKeyFile         string                   // --kubelet-client-key
	// RESTConfig is the process' kube client config: its bearer token (file), client certificate and CA are used
	// for kubelets when the fields above do not set them, as metrics-server does.
	RESTConfig   *rest.Config
	NodeSelector labels.Selector // --node-selector (nil = every node)
	// Compression asks kubelets for gzip (--kubelet-compression, on in DefaultOptions as in metrics-server). Off,
	// responses come uncompressed, many times the bytes, and every kept-alive connection then holds full-size TLS
	// and HTTP/2 read buffers, for no gzip CPU (BENCHMARKS.md, "Figures behind the comments").
	Compression bool
	// ConnMaxAge is about how long a kept-alive kubelet connection is used (--kubelet-connection-max-age, 10m in
	// DefaultOptions): it is closed by the first scrape past a point drawn between three quarters of it and all of
	// it, and the next scrape dials afresh (connage.go says why). Plain HTTP keeps its connections.
	ConnMaxAge time.Duration
}

// DefaultOptions are the defaults of every setting, the kubelet flags' defaults among them.
func DefaultOptions() Options {
	return Options{
		Timeout:               defaultTimeout,
		Concurrency:           defaultConcurrency,
		MaxResponseBytes:      defaultMaxResponseBytes,
		PreferredAddressTypes: slices.Clone(defaultAddressTypes),
		Port:                  defaultPort,
		Scheme:                defaultScheme,
		ConnMaxAge:            defaultConnMaxAge,
		NodeSelector:          labels.Everything(),
		Compression:           true,
	}
}

// complete returns o with its zero values replaced by the defaults, or the reasons it is unusable.
func (o Options) complete() (Options, error) {
	d := DefaultOptions()
	orDefault(&o.Timeout, d.Timeout)
	orDefault(&o.Concurrency, d.Concurrency)
	orDefault(&o.MaxResponseBytes, d.MaxResponseBytes)
	orDefault(&o.Port, d.Port)
	orDefault(&o.Scheme, d.Scheme)
	orDefault(&o.NodeSelector, d.NodeSelector)
	if len(o.PreferredAddressTypes) == 0 {
		o.PreferredAddressTypes = d.PreferredAddressTypes
	}
	errs := o.Validate()
	if o.Scheme == "http" {
		// No TLS buffer to give back, no certificate to check again: a new connection would only cost (connage.go).
		// Set after validation, so that a negative age is refused whatever the scheme.
		o.ConnMaxAge = 0
	}
	return o, errors.Join(errs...)
}

func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Validate reports every reason o cannot configure a scraper. It is the one place the kubelet settings are checked:
// cmd checks its flags by validating the Options they make, so the messages name the flags, in metrics-server's
// words where metrics-server has the check. Zero values are checked as they are (New fills in the defaults first).
func (o Options) Validate() []error {
	var errs []error
	if o.Concurrency <= 0 || o.MaxResponseBytes <= 0 {
		errs = append(errs, fmt.Errorf("scraper settings must be positive: concurrency %d, max response bytes %d",
			o.Concurrency, o.MaxResponseBytes))
	}
	if o.Scheme != "https" && o.Scheme != "http" {
		errs = append(errs, fmt.Errorf("kubelet scheme %q is neither https nor http", o.Scheme))
	}
	if o.CAFile != "" && o.InsecureTLS {
		errs = append(errs, errors.New("cannot use both --kubelet-certificate-authority and --kubelet-insecure-tls"))
	}
	if (o.ClientKeyFile != "") != (o.ClientCertFile != "") {
		errs = append(errs, errors.New("need both --kubelet-client-key and --kubelet-client-certificate"))
	}
	if o.Scheme == "http" {
		// Plain HTTP sends no credentials and verifies nothing: a setting for TLS would be silently ignored.
		for _, c := range []struct {
			flag string
			set  bool
		}{
			{"--kubelet-client-key", o.ClientKeyFile != ""},
			{"--kubelet-client-certificate", o.ClientCertFile != ""},
			{"--kubelet-insecure-tls", o.InsecureTLS},
			{"--kubelet-certificate-authority", o.CAFile != ""},
		} {
			if c.set {
				errs = append(errs, fmt.Errorf("cannot use both %s and --deprecated-kubelet-completely-insecure", c.flag))
			}
		}
	}
	if o.Timeout <= 0 {
		errs = append(errs, errors.New("kubelet-request-timeout should be positive"))
	}
	if o.ConnMaxAge < 0 {
		errs = append(errs, fmt.Errorf("kubelet-connection-max-age %v should not be negative (0 keeps connections)", o.ConnMaxAge))
	}
	if o.Port <= 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("kubelet-port %d is out of range 1-65535", o.Port))
	}
	return errs
}

// restConfig is the client config used for kubelets: the process' config with the kubelet flags applied on top,
// as metrics-server's KubeletClientOptions.Config does.
func (o Options) restConfig() *rest.Config {
	cfg := o.credentials()
	// A Proxy of its own (the default's very function: HTTPS_PROXY and NO_PROXY are honoured as before) makes
	// client-go build this transport for us alone, where it would otherwise share a cached one (or, for plain
	// HTTP, return http.DefaultTransport), so smallConnBuffers may set its buffer sizes before its first request.
	cfg.Proxy = http.ProxyFromEnvironment
	wrap := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		smallConnBuffers(rt)
		if wrap != nil {
			return wrap(rt)
		}
		return rt
	}
	return cfg
}

// credentials is the process' config with the kubelet flags applied on top.
func (o Options) credentials() *rest.Config {
	cfg := &rest.Config{}
	if o.RESTConfig != nil {
		cfg = rest.CopyConfig(o.RESTConfig)
	}
	if o.Scheme == "http" {
		// Never send credentials in clear text.
		cfg = rest.AnonymousClientConfig(cfg)
		cfg.TLSClientConfig = rest.TLSClientConfig{}
		return cfg
	}
	if o.InsecureTLS {
		cfg.TLSClientConfig.Insecure = true
		cfg.TLSClientConfig.CAData = nil
		cfg.TLSClientConfig.CAFile = ""
	}
	if o.CAFile != "" {
		cfg.TLSClientConfig.CAFile = o.CAFile
		cfg.TLSClientConfig.CAData = nil
	}
	if o.ClientCertFile != "" {
		cfg.TLSClientConfig.CertFile = o.ClientCertFile
		cfg.TLSClientConfig.CertData = nil
		cfg.TLSClientConfig.KeyFile = o.ClientKeyFile
		cfg.TLSClientConfig.KeyData = nil
	}
	// The scraper asks for gzip itself (Options.Compression) and decodes with a reader it reuses.
	cfg.DisableCompression = true
	// HTTP/1.1 even when the kubelet offers HTTP/2, as metrics-server's one request per node at a time makes of
	// it: a scrape is one request per connection at a time, so HTTP/2's multiplexing buys nothing, while its
	// per-connection state (framer, HPACK tables, flow control, a frame buffer) costs heap on every kept-alive
	// kubelet connection and bytes allocated per scrape (BENCHMARKS.md, issue 17).
	cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	// The API server's name is not the kubelet's: verify kubelets against their own address.
	cfg.TLSClientConfig.ServerName = ""
	return cfg
}
