package pki

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

// TestNewCA: the CA verifies itself as a root, and its PEM is its certificate.
func TestNewCA(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := ca.Cert.Verify(x509.VerifyOptions{Roots: roots}); err != nil || !ca.Cert.IsCA {
		t.Fatalf("CA %v (IsCA %v) does not verify as a root: %v", ca.Cert.Subject, ca.Cert.IsCA, err)
	}
	if b, _ := pem.Decode(ca.CertPEM); b == nil || string(b.Bytes) != string(ca.Cert.Raw) {
		t.Fatal("CertPEM is not the CA's certificate")
	}
}
