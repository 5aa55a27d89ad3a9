package scraper

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// Defaults applied by New to zero-valued Options, following metrics-server's manifests (DESIGN.md section 2).
const (
	DefaultResolution       = 15 * time.Second
	DefaultTimeout          = 10 * time.Second
	DefaultConcurrency      = 50
	DefaultMaxResponseBytes = 10 << 20
	DefaultPort             = 10250
	DefaultScheme           = "https"
)

// DefaultAddressTypes is the default --kubelet-preferred-address-types.
var DefaultAddressTypes = []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName}

// Options configure a Scraper. Zero values take the defaults above.
type Options struct {
	Resolution            time.Duration            // --metric-resolution (default 15s; 1s must work)
	Timeout               time.Duration            // --kubelet-request-timeout (default 10s); per request
	Concurrency           int                      // concurrent scrapes at least (default 50); more for large clusters (pace.go)
	MaxResponseBytes      int64                    // response-size cap (default 10 MiB)
	PreferredAddressTypes []corev1.NodeAddressType // default InternalIP,ExternalIP,Hostname
	Port                  int                      // --kubelet-port (default 10250)
	UseNodeStatusPort     bool                     // --kubelet-use-node-status-port
	Scheme                string                   // "https" (default) or "http" (no TLS, no credentials)
	InsecureTLS           bool                     // --kubelet-insecure-tls
	CAFile                string                   // --kubelet-certificate-authority
	ClientCertFile        string                   // --kubelet-client-certificate
	ClientKeyFile         string                   // --kubelet-client-key
	// RESTConfig is the process' kube client config: its bearer token (file), client certificate and CA are used
	// for kubelets when the fields above do not set them, as metrics-server does.
	RESTConfig   *rest.Config
	NodeSelector labels.Selector // --node-selector (nil = every node)
	// Compression asks kubelets for gzip (--kubelet-compression, on by default as in metrics-server). Off,
	// responses come uncompressed: about 13x the bytes of a ~3 KB gzip body on a 30-pod node, and every kept-alive
	// connection then holds full-size TLS and HTTP/2 read buffers (about 36 KB more per node), for no gzip CPU.
	Compression bool
}

// complete returns o with defaults filled in, or the reasons it is unusable.
func (o Options) complete() (Options, error) {
	var errs []error
	if o.Resolution < 0 || o.Timeout < 0 || o.Concurrency < 0 || o.MaxResponseBytes < 0 {
		errs = append(errs, fmt.Errorf("negative setting: resolution %v, timeout %v, concurrency %d, max response bytes %d",
			o.Resolution, o.Timeout, o.Concurrency, o.MaxResponseBytes))
	}
	if o.Resolution == 0 {
		o.Resolution = DefaultResolution
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if len(o.PreferredAddressTypes) == 0 {
		o.PreferredAddressTypes = DefaultAddressTypes
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("kubelet port %d is out of range 1-65535", o.Port))
	}
	if o.Scheme == "" {
		o.Scheme = DefaultScheme
	}
	if o.Scheme != "https" && o.Scheme != "http" {
		errs = append(errs, fmt.Errorf("kubelet scheme %q is neither https nor http", o.Scheme))
	}
	if o.CAFile != "" && o.InsecureTLS {
		errs = append(errs, errors.New("cannot use both --kubelet-certificate-authority and --kubelet-insecure-tls"))
	}
	if (o.ClientCertFile != "") != (o.ClientKeyFile != "") {
		errs = append(errs, errors.New("need both --kubelet-client-key and --kubelet-client-certificate"))
	}
	if o.NodeSelector == nil {
		o.NodeSelector = labels.Everything()
	}
	return o, errors.Join(errs...)
}

// restConfig is the client config used for kubelets: the process' config with the kubelet flags applied on top,
// as metrics-server's KubeletClientOptions.Config does.
func (o Options) restConfig() *rest.Config {
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
	// The API server's name is not the kubelet's: verify kubelets against their own address.
	cfg.TLSClientConfig.ServerName = ""
	return cfg
}
