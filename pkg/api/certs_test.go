package api

import (
	"testing"

	"github.com/metrics-ring/metrics-ring/internal/testpki"
)

// frontProxyPKI is what kube-apiserver's aggregator holds: a request-header CA and a client certificate signed by
// it (CN front-proxy-client), which it presents while passing the user in X-Remote-User / X-Remote-Group.
type frontProxyPKI struct {
	caFile            string
	clientCertPEM     []byte
	clientKeyPEM      []byte
	otherCertPEM      []byte // signed by an unrelated CA: must not be trusted for request headers
	otherKeyPEM       []byte
	allowedClientName string
}

func newFrontProxyPKI(t *testing.T, dir string) frontProxyPKI {
	t.Helper()
	ca := testpki.NewCA(t, "front-proxy-ca")
	client := ca.Client(t, "front-proxy-client")
	other := testpki.NewCA(t, "someone-else").Client(t, "front-proxy-client")
	return frontProxyPKI{caFile: ca.WriteCert(t, dir, "front-proxy-ca.crt"), clientCertPEM: client.CertPEM,
		clientKeyPEM: client.KeyPEM, otherCertPEM: other.CertPEM, otherKeyPEM: other.KeyPEM,
		allowedClientName: "front-proxy-client"}
}
