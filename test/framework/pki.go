package framework

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/metrics-ring/metrics-ring/test/internal/pki"
)

// CA is a throwaway certificate authority for one run. Keys are ECDSA P-256: fast to generate, and every
// Kubernetes component accepts them.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	// CertFile is where CertPEM was written, for flags that want a path.
	CertFile string
}

// KeyPair is a PEM certificate and key, and the files they were written to.
type KeyPair struct {
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string
}

// CertSpec describes a leaf certificate.
type CertSpec struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool // server auth usage; otherwise client auth
}

// NewCA creates a self-signed CA (internal/pki) and writes its certificate to dir/name.crt.
func NewCA(dir, name string) (*CA, error) {
	c, err := pki.NewCA(name, 10*24*time.Hour)
	if err != nil {
		return nil, err
	}
	ca := &CA{Cert: c.Cert, Key: c.Key, CertPEM: c.CertPEM, CertFile: filepath.Join(dir, name+".crt")}
	if err := os.WriteFile(ca.CertFile, ca.CertPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", ca.CertFile, err)
	}
	return ca, nil
}

// Issue signs a leaf certificate and writes it to dir/name.crt and dir/name.key.
func (ca *CA) Issue(dir, name string, spec CertSpec) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating %s key: %w", name, err)
	}
	now := time.Now()
	usage := x509.ExtKeyUsageClientAuth
	if spec.Server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: pki.Serial(),
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     spec.DNSNames,
		IPAddresses:  spec.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", name, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding %s key: %w", name, err)
	}
	kp := &KeyPair{
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   keyPEM,
		CertFile: filepath.Join(dir, name+".crt"),
		KeyFile:  filepath.Join(dir, name+".key"),
	}
	if err := os.WriteFile(kp.CertFile, kp.CertPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", kp.CertFile, err)
	}
	if err := os.WriteFile(kp.KeyFile, kp.KeyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", kp.KeyFile, err)
	}
	return kp, nil
}

// writeSigningKey writes a fresh service-account signing key (private key; kube-apiserver derives the public
// key from it for verification).
func writeSigningKey(file string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating service-account key: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, keyPEM, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshalling key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}
