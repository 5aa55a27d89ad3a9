package api

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
	ca, caKey := selfSignedCA(t, "front-proxy-ca")
	cert, key := signedClient(t, "front-proxy-client", ca, caKey)
	other, otherKey := selfSignedCA(t, "someone-else")
	otherCert, otherCertKey := signedClient(t, "front-proxy-client", other, otherKey)
	caFile := filepath.Join(dir, "front-proxy-ca.crt")
	if err := os.WriteFile(caFile, pemCert(ca), 0o600); err != nil {
		t.Fatal(err)
	}
	return frontProxyPKI{caFile: caFile, clientCertPEM: cert, clientKeyPEM: key, otherCertPEM: otherCert,
		otherKeyPEM: otherCertKey, allowedClientName: "front-proxy-client"}
}

func selfSignedCA(t *testing.T, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func signedClient(t *testing.T, cn string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}
