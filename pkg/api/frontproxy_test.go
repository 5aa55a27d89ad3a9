package api

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"

	"github.com/metrics-ring/metrics-ring/internal/testpki"
)

// swappableCA is a request-header CA provider whose bundle a test replaces, as a rotation of the front proxy's CA
// reloaded from its file or ConfigMap does: new options, with a new pool, from then on.
type swappableCA struct {
	dynamiccertificates.CAContentProvider
	opts atomic.Pointer[x509.VerifyOptions]
}

func newSwappableCA(t testing.TB, cas ...*testpki.CA) *swappableCA {
	t.Helper()
	c := &swappableCA{}
	c.set(cas...)
	return c
}

func (c *swappableCA) set(cas ...*testpki.CA) {
	opts := x509.VerifyOptions{Roots: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, ca := range cas {
		opts.Roots.AddCert(ca.Cert)
	}
	c.opts.Store(&opts)
}

func (c *swappableCA) VerifyOptions() (x509.VerifyOptions, bool) { return *c.opts.Load(), true }

// requestHeaderConfig is the delegated authenticator's request-header configuration, as --requestheader-* flags
// make it, with the proxy's CA from ca.
func requestHeaderConfig(ca dynamiccertificates.CAContentProvider, allowed ...string) *authenticatorfactory.RequestHeaderConfig {
	return &authenticatorfactory.RequestHeaderConfig{
		UsernameHeaders:     headerrequest.StaticStringSlice{"X-Remote-User"},
		UIDHeaders:          headerrequest.StaticStringSlice{"X-Remote-Uid"},
		GroupHeaders:        headerrequest.StaticStringSlice{"X-Remote-Group"},
		ExtraHeaderPrefixes: headerrequest.StaticStringSlice{"X-Remote-Extra-"},
		CAContentProvider:   ca,
		AllowedClientNames:  headerrequest.StaticStringSlice(allowed),
	}
}

// delegatedAuthenticator is what the apiserver makes of config, alone.
func delegatedAuthenticator(t testing.TB, config *authenticatorfactory.RequestHeaderConfig) authenticator.Request {
	t.Helper()
	a, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{RequestHeaderConfig: config}.New()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// proxied is a request presenting chain (PEM, leaf first) on its connection, for user in X-Remote-User (none when
// empty) in the group ops, with an extra "reason".
func proxied(t testing.TB, user string, chain ...[]byte) *http.Request {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, "https://127.0.0.1/apis/metrics.k8s.io/v1/pods", nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		r.Header.Set("X-Remote-User", user)
		r.Header.Set("X-Remote-Group", "ops")
		r.Header.Set("X-Remote-Extra-Reason", "hpa")
	}
	r.TLS = &tls.ConnectionState{}
	for _, p := range chain {
		block, _ := pem.Decode(p)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		r.TLS.PeerCertificates = append(r.TLS.PeerCertificates, c)
	}
	return r
}

// answer is what an authenticator made of a request, as the apiserver uses it.
type answer struct {
	ok, failed bool
	user       string
	groups     []string
	extra      map[string][]string
}

func authenticate(a authenticator.Request, r *http.Request) answer {
	resp, ok, err := a.AuthenticateRequest(r)
	got := answer{ok: ok, failed: err != nil}
	if ok {
		got.user, got.groups, got.extra = resp.User.GetName(), resp.User.GetGroups(), resp.User.GetExtra()
	}
	return got
}

// countingVerify counts f's verifications of a chain.
func countingVerify(f *frontProxies) *atomic.Int64 {
	n := &atomic.Int64{}
	verify := f.verify
	f.verify = func(c *x509.Certificate, o x509.VerifyOptions) ([][]*x509.Certificate, error) {
		n.Add(1)
		return verify(c, o)
	}
	return n
}

func TestFrontProxiesAnswerAsTheDelegatedAuthenticator(t *testing.T) {
	root := testpki.NewCA(t, "front-proxy-ca")
	inter := root.Intermediate(t, "front-proxy-intermediate")
	proxy := root.Client(t, "front-proxy-client")
	stranger := root.Client(t, "someone")
	viaInter := inter.Client(t, "front-proxy-client")
	forged := testpki.NewCA(t, "someone-else").Client(t, "front-proxy-client")
	config := requestHeaderConfig(newSwappableCA(t, root), "front-proxy-client")
	tests := []struct {
		name  string
		user  string
		chain [][]byte
	}{
		{"the proxy's user", "alice", [][]byte{proxy.CertPEM}},
		{"the proxy, no user", "", [][]byte{proxy.CertPEM}},
		{"a name not allowed", "alice", [][]byte{stranger.CertPEM}},
		{"another CA's certificate", "alice", [][]byte{forged.CertPEM}},
		{"through an intermediate", "alice", [][]byte{viaInter.CertPEM, inter.CertPEM}},
		{"the same leaf, no intermediate", "alice", [][]byte{viaInter.CertPEM}},
		{"no certificate", "alice", nil},
	}
	once := authenticateFrontProxiesOnce(delegatedAuthenticator(t, config), config)
	for round := range 2 { // the second round answers from what the first verified
		for _, tt := range tests {
			want := authenticate(delegatedAuthenticator(t, config), proxied(t, tt.user, tt.chain...))
			got := authenticate(once, proxied(t, tt.user, tt.chain...))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round %d, %s: got %+v, the delegated authenticator %+v", round, tt.name, got, want)
			}
		}
	}
	if got := authenticate(once, proxied(t, "alice", proxy.CertPEM)); got.user != "alice" ||
		!reflect.DeepEqual(got.groups, []string{"ops", "system:authenticated"}) {
		t.Errorf("the proxy's user: %+v, want alice in ops and system:authenticated", got)
	}
}

func TestFrontProxyChainVerifiedOnce(t *testing.T) {
	root := testpki.NewCA(t, "front-proxy-ca")
	proxy := root.Client(t, "front-proxy-client")
	config := requestHeaderConfig(newSwappableCA(t, root), "front-proxy-client")
	f := authenticateFrontProxiesOnce(delegatedAuthenticator(t, config), config).(*frontProxies)
	verifiedOnce(t, f, proxy.CertPEM, 100)
}

// verifiedOnce authenticates n requests presenting the chain certPEM through f, each as its user, and checks that
// f verified the chain once.
func verifiedOnce(t *testing.T, f *frontProxies, certPEM []byte, n int) {
	t.Helper()
	verifications := countingVerify(f)
	for i := range n {
		if got := authenticate(f, proxied(t, "hpa", certPEM)); got.user != "hpa" {
			t.Fatalf("request %d: %+v", i, got)
		}
	}
	if v := verifications.Load(); v != 1 {
		t.Errorf("%d requests on one chain verified it %d times, want 1", n, v)
	}
}

// nobodyElse authenticates no request.
type nobodyElse struct{}

func (nobodyElse) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	return nil, false, nil
}

func TestFrontProxyVerifiedAgain(t *testing.T) {
	root := testpki.NewCA(t, "front-proxy-ca")
	proxy := root.Client(t, "front-proxy-client")
	leaf := proxied(t, "alice", proxy.CertPEM).TLS.PeerCertificates[0]
	tests := []struct {
		name     string
		change   func(clock *testClock, ca *swappableCA)
		verifies int64
		refused  bool
	}{
		{"nothing changed", func(*testClock, *swappableCA) {}, 1, false},
		{"past reverifyAfter", func(c *testClock, _ *swappableCA) { c.Set(c.Now().Add(reverifyAfter + time.Second)) }, 2, false},
		{"the clock set back", func(c *testClock, _ *swappableCA) { c.Set(c.Now().Add(-time.Minute)) }, 2, false},
		{"past the leaf's validity", func(c *testClock, _ *swappableCA) { c.Set(leaf.NotAfter.Add(time.Second)) }, 2, true},
		{"the same CA reloaded", func(_ *testClock, ca *swappableCA) { ca.set(root) }, 2, false},
		{"the CA rotated", func(_ *testClock, ca *swappableCA) { ca.set(testpki.NewCA(t, "next-ca")) }, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca := newSwappableCA(t, root)
			config := requestHeaderConfig(ca, "front-proxy-client")
			// Nothing else authenticates: the delegated authenticator would verify against the real clock.
			f := authenticateFrontProxiesOnce(nobodyElse{}, config).(*frontProxies)
			clock := &testClock{now: time.Now()}
			f.now = clock.Now
			verifications := countingVerify(f)
			if got := authenticate(f, proxied(t, "alice", proxy.CertPEM)); got.user != "alice" {
				t.Fatalf("first request: %+v", got)
			}
			tt.change(clock, ca)
			got := authenticate(f, proxied(t, "alice", proxy.CertPEM))
			if refused := got.user != "alice"; refused != tt.refused {
				t.Errorf("after the change: %+v, want refused %v", got, tt.refused)
			}
			if n := verifications.Load(); n != tt.verifies {
				t.Errorf("verified %d times, want %d", n, tt.verifies)
			}
		})
	}
}

func TestVerifiedChainsBounded(t *testing.T) {
	root := testpki.NewCA(t, "front-proxy-ca")
	config := requestHeaderConfig(newSwappableCA(t, root))
	f := authenticateFrontProxiesOnce(delegatedAuthenticator(t, config), config).(*frontProxies)
	for i := range 3 * maxVerifiedChains {
		if got := authenticate(f, proxied(t, "alice", root.Client(t, "proxy").CertPEM)); got.user != "alice" {
			t.Fatalf("proxy %d: %+v", i, got)
		}
		if n := len(*f.known.Load()); n > maxVerifiedChains {
			t.Fatalf("%d chains kept after %d proxies, want at most %d", n, i+1, maxVerifiedChains)
		}
	}
}

// TestServersAuthenticatorVerifiesAChainOnce checks the server's wiring: the authenticator NewServerOptions'
// Config makes for a request-header CA verifies the aggregator's chain once, and still refuses another CA's.
func TestServersAuthenticatorVerifiesAChainOnce(t *testing.T) {
	dir := t.TempDir()
	pki := newFrontProxyPKI(t, dir)
	o := loopbackOptions(t, dir)
	o.Authentication.RequestHeader.ClientCAFile = pki.caFile
	o.Authentication.RequestHeader.AllowedNames = []string{pki.allowedClientName}
	o.Authentication.RequestHeader.UsernameHeaders = []string{"X-Remote-User"}
	o.Authentication.RequestHeader.GroupHeaders = []string{"X-Remote-Group"}
	o.Authentication.RequestHeader.ExtraHeaderPrefixes = []string{"X-Remote-Extra-"}
	o.Authorization.RemoteKubeConfigFileOptional = true
	cfg, err := o.Config("test")
	if err != nil {
		t.Fatal(err)
	}
	f, ok := cfg.Authentication.Authenticator.(*frontProxies)
	if !ok {
		t.Fatalf("the server's authenticator is a %T: it verifies the front proxy's chain at every request", cfg.Authentication.Authenticator)
	}
	verifiedOnce(t, f, pki.clientCertPEM, 20)
	if got := authenticate(f, proxied(t, "hpa", pki.otherCertPEM)); got.ok {
		t.Errorf("another CA's certificate authenticated %+v", got)
	}
}
