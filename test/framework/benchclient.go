package framework

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// BenchClient is an admin HTTP client for the backend's own address (its certificate verified for the
// Service's name, as the aggregator does) that asks for uncompressed responses, so byte counts are the
// payload's and latency carries no gzip cost. It is for measuring: timeout bounds each request.
func (b *Backend) BenchClient(timeout time.Duration) (*http.Client, error) {
	hc, err := httpsClient(b.m.ServingCA.CertPEM, b.m.cp.admin)
	if err != nil {
		return nil, err
	}
	tr := hc.Transport.(*http.Transport)
	tr.TLSClientConfig.ServerName = b.Service + "." + b.m.Namespace + ".svc"
	tr.DisableCompression = true
	// Measuring goroutines ask at once (the soak's probes, 8 at a time): with Go's default of 2 idle connections
	// a host, every request past two closed its connection, and the server's TLS handshakes for the benchmark
	// were counted as its cost of serving.
	tr.MaxIdleConnsPerHost = 64
	hc.Timeout = timeout
	return hc, nil
}

// AdminHTTPClient is an uncompressed admin HTTP client for kube-apiserver (cp.URL), e.g. to time requests
// through the aggregator.
func (cp *ControlPlane) AdminHTTPClient(timeout time.Duration) (*http.Client, error) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.DisableCompression = true
	cfg.Timeout = timeout
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building admin HTTP client: %w", err)
	}
	return hc, nil
}
