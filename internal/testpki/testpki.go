// Package testpki mints the throwaway certificate authorities and client certificates of the main module's tests
// (the aggregator's front-proxy CA in pkg/api, a kubelet's client CA in pkg/scraper, the API server's client CA in
// cmd/metrics-ring/app): one place for how a test certificate is made. Only tests import it.
//
// The test module keeps a twin, test/internal/pki: importing this package from there would make the test module
// require the main module, and with it the main module's dependencies in the test module's build.
//
// Keys are ECDSA P-256: fast to generate, and every Kubernetes component accepts them. Certificates are valid from
// an hour ago (clock skew between processes) for a day.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const validity = 24 * time.Hour

// CA is a certificate authority (self-signed, or an intermediate): its certificate, parsed and as PEM, and its key.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
}

// KeyPair is a leaf certificate and its private key, both PEM ("CERTIFICATE", "EC PRIVATE KEY").
type KeyPair struct {
	CertPEM, KeyPEM []byte
}

// NewCA creates a self-signed CA whose subject's common name is name; it fails t on error.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	return newCA(t, name, nil)
}

// Intermediate creates a CA whose subject's common name is name, signed by ca; it fails t on error.
func (ca *CA) Intermediate(t testing.TB, name string) *CA {
	t.Helper()
	return newCA(t, name, ca)
}

// newCA creates a CA signed by parent, or by itself when parent is nil.
func newCA(t testing.TB, name string, parent *CA) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	if err != nil {
		t.Fatalf("signing CA %s: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parsing CA %s: %v", name, err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// WriteCert writes the CA's certificate to dir/name and returns the path, for flags that want a file.
func (ca *CA) WriteCert(t testing.TB, dir, name string) string {
	t.Helper()
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Client signs a client certificate (client auth usage only) for the user commonName in the groups organizations;
// it fails t on error.
func (ca *CA) Client(t testing.TB, commonName string, organizations ...string) KeyPair {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: commonName, Organization: organizations},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatalf("signing %s: %v", commonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// serial is random: unique without state shared between tests running in parallel.
func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
