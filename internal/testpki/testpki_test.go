package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
)

// TestClientChainsToItsCAOnly checks what the tests that use this package rely on: a client certificate loads as a
// TLS key pair, verifies for client auth against its own CA and not against another CA, and carries its groups.
func TestClientChainsToItsCAOnly(t *testing.T) {
	ca, other := NewCA(t, "test-ca"), NewCA(t, "someone-else")
	pair := ca.Client(t, "admin", "system:masters")
	if _, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM); err != nil {
		t.Fatalf("the client's key pair does not load: %v", err)
	}
	block, _ := pem.Decode(pair.CertPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "admin" || len(cert.Subject.Organization) != 1 ||
		cert.Subject.Organization[0] != "system:masters" {
		t.Errorf("subject %v, want CN admin in system:masters", cert.Subject)
	}
	for _, tc := range []struct {
		name  string
		roots *CA
		usage x509.ExtKeyUsage
		ok    bool
	}{
		{"its CA, client auth", ca, x509.ExtKeyUsageClientAuth, true},
		{"another CA", other, x509.ExtKeyUsageClientAuth, false},
		{"its CA, server auth", ca, x509.ExtKeyUsageServerAuth, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(tc.roots.CertPEM) {
				t.Fatal("the CA's PEM does not parse")
			}
			_, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			if (err == nil) != tc.ok {
				t.Fatalf("verify: %v, want ok=%v", err, tc.ok)
			}
		})
	}
	file := ca.WriteCert(t, t.TempDir(), "ca.crt")
	if got, err := os.ReadFile(file); err != nil || string(got) != string(ca.CertPEM) {
		t.Fatalf("written CA: %v, %q", err, got)
	}
}
