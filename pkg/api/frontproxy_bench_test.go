package api

import (
	"testing"

	"github.com/metrics-ring/metrics-ring/internal/testpki"
)

// BenchmarkFrontProxyAuthentication is the cost of authenticating one request of the aggregator: by the
// delegated authenticator alone (its chain verified at every request) and with frontProxies before it.
func BenchmarkFrontProxyAuthentication(b *testing.B) {
	root := testpki.NewCA(b, "front-proxy-ca")
	proxy := root.Client(b, "front-proxy-client")
	config := requestHeaderConfig(newSwappableCA(b, root), "front-proxy-client")
	delegated := delegatedAuthenticator(b, config)
	for _, bb := range []struct {
		name string
		once bool
	}{{"delegated", false}, {"verified once", true}} {
		b.Run(bb.name, func(b *testing.B) {
			a := delegated
			if bb.once {
				a = authenticateFrontProxiesOnce(delegated, config)
			}
			r := proxied(b, "hpa", proxy.CertPEM)
			header := r.Header.Clone()
			b.ReportAllocs()
			for b.Loop() {
				r.Header = header.Clone()
				if _, ok, err := a.AuthenticateRequest(r); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
