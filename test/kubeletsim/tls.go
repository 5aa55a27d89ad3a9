package kubeletsim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/metrics-ring/metrics-ring/test/internal/pki"
)

// authority is the sim's own CA. Every node's serving certificate shares one leaf key: signing is cheap, key
// generation is not, and at 10,000 nodes a key per node would dominate start-up for no test value.
type authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	pem     []byte
	leafKey *ecdsa.PrivateKey
}

type certResult struct {
	cert *tls.Certificate
	err  error
}

func newAuthority() (*authority, error) {
	ca, err := pki.NewCA("kubeletsim-ca", 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &authority{cert: ca.Cert, key: ca.Key, leafKey: leafKey, pem: ca.CertPEM}, nil
}

// serving issues a serving certificate for a kubelet: its node name and its IP, as a kubelet's serving
// certificate has, so clients can verify either address type.
func (a *authority) serving(nodeName, host string, serial int64) (*tls.Certificate, error) {
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("kubeletsim: host %q is not an IP address", host)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{nodeName},
		IPAddresses:  []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &a.leafKey.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("kubeletsim: signing serving certificate for %s: %w", nodeName, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: a.leafKey}, nil
}

// loadOrNewAuthority reads a bundle written by CABundlePEM, or makes a new authority when there is none.
func loadOrNewAuthority(bundle []byte) (*authority, error) {
	if len(bundle) == 0 {
		return newAuthority()
	}
	var blocks []*pem.Block
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		blocks = append(blocks, b)
	}
	if len(blocks) != 3 || blocks[0].Type != "CERTIFICATE" || blocks[1].Type != "EC PRIVATE KEY" ||
		blocks[2].Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("kubeletsim: a CA bundle is a CERTIFICATE and two EC PRIVATE KEY blocks, got %d blocks", len(blocks))
	}
	cert, err := x509.ParseCertificate(blocks[0].Bytes)
	if err != nil {
		return nil, fmt.Errorf("kubeletsim: CA bundle certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(blocks[1].Bytes)
	if err != nil {
		return nil, fmt.Errorf("kubeletsim: CA bundle key: %w", err)
	}
	leafKey, err := x509.ParseECPrivateKey(blocks[2].Bytes)
	if err != nil {
		return nil, fmt.Errorf("kubeletsim: CA bundle leaf key: %w", err)
	}
	return &authority{cert: cert, key: key, leafKey: leafKey, pem: pem.EncodeToMemory(blocks[0])}, nil
}

// CABundlePEM is the sim's authority with its private keys, for Config.CA of the sims that serve other shards
// of the same cluster. It is a secret of the test run: write it only where the run's other secrets go.
func (s *Sim) CABundlePEM() ([]byte, error) {
	out := append([]byte(nil), s.ca.pem...)
	for _, k := range []*ecdsa.PrivateKey{s.ca.key, s.ca.leafKey} {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, fmt.Errorf("kubeletsim: encoding CA key: %w", err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})...)
	}
	return out, nil
}

// CACertPEM is the PEM of the CA that signed every node's serving certificate.
func (s *Sim) CACertPEM() []byte { return append([]byte(nil), s.ca.pem...) }

// certFor returns the node's serving certificate, issued on first use so Start stays fast for big clusters.
func (s *Sim) certFor(n *node) (*tls.Certificate, error) {
	n.certOnce.Do(func() {
		c, err := s.ca.serving(n.name, s.cfg.Host, int64(n.index)+2)
		n.cert = &certResult{cert: c, err: err}
	})
	return n.cert.cert, n.cert.err
}
