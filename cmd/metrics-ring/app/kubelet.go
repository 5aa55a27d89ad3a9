package app

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/metrics-ring/metrics-ring/pkg/scraper"
)

// KubeletOptions are metrics-server v0.9's kubelet client flags, same names, defaults (except the address types,
// which follow its manifests) and meaning.
type KubeletOptions struct {
	UseNodeStatusPort            bool
	Port                         int
	InsecureTLS                  bool
	PreferredAddressTypes        []string
	CAFile                       string
	ClientKeyFile                string
	ClientCertFile               string
	DeprecatedCompletelyInsecure bool
	RequestTimeout               time.Duration
	NodeSelector                 string
	// Compression is metrics-ring's own (default on): metrics-server always asks for gzip.
	Compression bool
	// ConnMaxAge is metrics-ring's own (default 10m): metrics-server keeps a connection for as long as it lives.
	ConnMaxAge time.Duration
}

// NewKubeletOptions returns the defaults, the scraper's.
func NewKubeletOptions() *KubeletOptions {
	d := scraper.DefaultOptions()
	o := &KubeletOptions{Port: d.Port, RequestTimeout: d.Timeout, Compression: d.Compression, ConnMaxAge: d.ConnMaxAge}
	for _, t := range d.PreferredAddressTypes {
		o.PreferredAddressTypes = append(o.PreferredAddressTypes, string(t))
	}
	return o
}

// AddFlags adds the kubelet client flags.
func (o *KubeletOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.InsecureTLS, "kubelet-insecure-tls", o.InsecureTLS, "Do not verify CA of serving certificates presented by Kubelets.  For testing purposes only.")
	fs.BoolVar(&o.UseNodeStatusPort, "kubelet-use-node-status-port", o.UseNodeStatusPort, "Use the port in the node status. Takes precedence over --kubelet-port flag.")
	fs.IntVar(&o.Port, "kubelet-port", o.Port, "The port to use to connect to Kubelets.")
	fs.StringSliceVar(&o.PreferredAddressTypes, "kubelet-preferred-address-types", o.PreferredAddressTypes, "The priority of node address types to use when determining which address to use to connect to a particular node")
	fs.StringVar(&o.CAFile, "kubelet-certificate-authority", o.CAFile, "Path to the CA to use to validate the Kubelet's serving certificates.")
	fs.StringVar(&o.ClientKeyFile, "kubelet-client-key", o.ClientKeyFile, "Path to a client key file for TLS.")
	fs.StringVar(&o.ClientCertFile, "kubelet-client-certificate", o.ClientCertFile, "Path to a client cert file for TLS.")
	fs.DurationVar(&o.RequestTimeout, "kubelet-request-timeout", o.RequestTimeout, "The length of time to wait before giving up on a single request to Kubelet. Non-zero values should contain a corresponding time unit (e.g. 1s, 2m, 3h).")
	fs.StringVarP(&o.NodeSelector, "node-selector", "l", o.NodeSelector, "Selector (label query) to filter on, not including uninitialized ones, supports '=', '==', and '!='.(e.g. -l key1=value1,key2=value2).")
	fs.BoolVar(&o.Compression, "kubelet-compression", o.Compression, "Ask kubelets for gzip-compressed responses, as metrics-server does. Off, a /metrics/resource response is about 13 times larger on the wire and every kept-alive kubelet connection holds about 36 KB more of read buffers, for no gzip CPU on kubelets and none here.")
	fs.DurationVar(&o.ConnMaxAge, "kubelet-connection-max-age", o.ConnMaxAge, "About how long a kept-alive kubelet connection is used: the first scrape past a random point between three quarters of it and all of it closes the connection, and the next opens a new one, which checks the kubelet's serving certificate again and gives back TLS read buffers that a busy moment grew. 0, or plain HTTP, keeps connections for as long as they live.")
	fs.BoolVar(&o.DeprecatedCompletelyInsecure, "deprecated-kubelet-completely-insecure", o.DeprecatedCompletelyInsecure, "DEPRECATED: Do not use any encryption, authorization, or authentication when communicating with the Kubelet. This is rarely the right option, since it leaves kubelet communication completely insecure.  If you encounter auth errors, make sure you've enabled token webhook auth on the Kubelet, and if you're in a test cluster with self-signed Kubelet certificates, consider using kubelet-insecure-tls instead.")
}

// Validate reports invalid kubelet flags. The scraper's Options own the checks and their messages (metrics-server's),
// so the flags are checked as the options they make.
func (o *KubeletOptions) Validate() []error {
	return validateAs(o.scraperOptions())
}

// ScraperOptions maps the flags onto the scraper's options.
func (o *KubeletOptions) ScraperOptions(restConfig *rest.Config) (scraper.Options, error) {
	so, err := o.scraperOptions()
	so.RESTConfig = restConfig
	return so, err
}

// scraperOptions maps every kubelet flag onto the scraper's defaults; the error is an invalid --node-selector.
func (o *KubeletOptions) scraperOptions() (scraper.Options, error) {
	so := scraper.DefaultOptions()
	so.Timeout = o.RequestTimeout
	so.Port = o.Port
	so.UseNodeStatusPort = o.UseNodeStatusPort
	so.InsecureTLS = o.InsecureTLS
	so.CAFile = o.CAFile
	so.ClientCertFile = o.ClientCertFile
	so.ClientKeyFile = o.ClientKeyFile
	so.Compression = o.Compression
	so.ConnMaxAge = o.ConnMaxAge
	if o.DeprecatedCompletelyInsecure {
		so.Scheme = "http"
	}
	so.PreferredAddressTypes = nil
	for _, t := range o.PreferredAddressTypes {
		so.PreferredAddressTypes = append(so.PreferredAddressTypes, corev1.NodeAddressType(t))
	}
	sel, err := labels.Parse(o.NodeSelector)
	if err != nil {
		return so, fmt.Errorf("invalid --node-selector %q: %w", o.NodeSelector, err)
	}
	so.NodeSelector = sel
	return so, nil
}
