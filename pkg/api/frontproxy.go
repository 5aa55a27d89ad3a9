package api

import (
	"bytes"
	"crypto/x509"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
)

// frontProxies authenticates requests from kube-apiserver's front proxy (the aggregator, which passes every user's
// request to us) as the delegated request-header authenticator does, but verifies each certificate chain once,
// not at every request: the aggregator keeps its connections and presents the same chain on all of them, and
// building and checking its signatures again for each HPA's list was the largest single cost of serving it
// (BENCHMARKS.md). Whatever is not a front proxy's verified request, or has no user in its headers, goes to next,
// the delegated authenticator, unchanged.
//
// A verification is reused only for the same leaf with the same intermediates, against the same CA pool and
// options object (the CA provider makes a new one when its bundle changes, so a rotated CA verifies again), within
// the chain's validity, and for at most reverifyAfter. The allowed client names are checked at every request, as
// they may change without the CA.
type frontProxies struct {
	config  *authenticatorfactory.RequestHeaderConfig
	headers authenticator.Request // the user in the request's headers, with system:authenticated
	next    authenticator.Request
	now     func() time.Time
	verify  func(*x509.Certificate, x509.VerifyOptions) ([][]*x509.Certificate, error)

	mu    sync.Mutex                               // writers of known
	known atomic.Pointer[map[string]verifiedChain] // by the leaf's DER; replaced whole, read without a lock
}

// verifiedChain is what a leaf was verified with, and the time it holds for.
type verifiedChain struct {
	intermediates [][]byte // the DER of the certificates presented after the leaf
	opts          x509.VerifyOptions
	from, until   time.Time
}

const (
	// reverifyAfter bounds how long a verification is trusted, whatever the chain's validity: a change of what it
	// depended on that the pool's identity does not show is taken within it.
	reverifyAfter = 5 * time.Minute
	// maxVerifiedChains bounds what is remembered: a front proxy is one certificate an aggregator (a few in HA,
	// twice during a rotation), and only chains signed by the request-header CA enter.
	maxVerifiedChains = 16
)

// authenticateFrontProxiesOnce wraps next, the delegated authenticator made for config (nil when there is no
// request-header CA: next is returned as it is).
func authenticateFrontProxiesOnce(next authenticator.Request, config *authenticatorfactory.RequestHeaderConfig) authenticator.Request {
	if next == nil || config == nil || config.CAContentProvider == nil {
		return next
	}
	f := &frontProxies{
		config: config,
		headers: group.NewAuthenticatedGroupAdder(headerrequest.NewDynamic(config.UsernameHeaders, config.UIDHeaders,
			config.GroupHeaders, config.ExtraHeaderPrefixes)),
		next:   next,
		now:    time.Now,
		verify: (*x509.Certificate).Verify,
	}
	f.known.Store(&map[string]verifiedChain{})
	return f
}

func (f *frontProxies) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return f.next.AuthenticateRequest(req)
	}
	chain := req.TLS.PeerCertificates
	opts, ok := f.config.CAContentProvider.VerifyOptions()
	if !ok || !f.allowedName(chain[0]) || !f.verified(chain, opts) {
		return f.next.AuthenticateRequest(req)
	}
	resp, ok, err := f.headers.AuthenticateRequest(req)
	if err != nil || !ok {
		return f.next.AuthenticateRequest(req)
	}
	return resp, true, nil
}

// allowedName is the request-header authenticator's check of the proxy's common name (none listed: any).
func (f *frontProxies) allowedName(leaf *x509.Certificate) bool {
	var names []string
	if f.config.AllowedClientNames != nil {
		names = f.config.AllowedClientNames.Value()
	}
	return len(names) == 0 || slices.Contains(names, leaf.Subject.CommonName)
}

// verified reports whether chain verifies with opts now, as the request-header authenticator verifies it (the
// certificates after the leaf are its intermediates when opts has none), once for the same inputs.
func (f *frontProxies) verified(chain []*x509.Certificate, opts x509.VerifyOptions) bool {
	// The wall clock alone, as x509 compares: with the monotonic reading, a wall clock set past a certificate's
	// end (or a machine resumed after a suspend) would not end its verification here.
	now := f.now().Round(0)
	if v, ok := (*f.known.Load())[string(chain[0].Raw)]; ok && v.holds(chain, opts, now) {
		return true
	}
	asked := opts
	if opts.Intermediates == nil && len(chain) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range chain[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	if opts.CurrentTime.IsZero() {
		opts.CurrentTime = now
	}
	chains, err := f.verify(chain[0], opts)
	if err != nil || len(chains) == 0 {
		return false
	}
	f.remember(chain, asked, chains[0], now)
	return true
}

// holds reports whether v answers for chain verified with opts at now.
func (v verifiedChain) holds(chain []*x509.Certificate, opts x509.VerifyOptions, now time.Time) bool {
	if now.Before(v.from) || now.After(v.until) || len(chain)-1 != len(v.intermediates) || !sameOptions(v.opts, opts) {
		return false
	}
	for i, c := range chain[1:] {
		if !bytes.Equal(c.Raw, v.intermediates[i]) {
			return false
		}
	}
	return true
}

// sameOptions reports whether a and b are one CA provider's options for one bundle: the same pools, by identity,
// and the same other fields. Policies (slices of OIDs) are not compared: options with any are never reused, and
// the CA providers set none.
func sameOptions(a, b x509.VerifyOptions) bool {
	return a.Roots == b.Roots && a.Intermediates == b.Intermediates && a.DNSName == b.DNSName &&
		a.CurrentTime.Equal(b.CurrentTime) && slices.Equal(a.KeyUsages, b.KeyUsages) &&
		a.MaxConstraintComparisions == b.MaxConstraintComparisions && len(a.CertificatePolicies) == 0 &&
		len(b.CertificatePolicies) == 0
}

// remember keeps chain's verification with opts, found at now through verifiedBy (leaf to root), for as long
// as every certificate of it is valid and at most reverifyAfter; a clock set back before now verifies again.
func (f *frontProxies) remember(chain []*x509.Certificate, opts x509.VerifyOptions, verifiedBy []*x509.Certificate, now time.Time) {
	v := verifiedChain{opts: opts, from: now, until: now.Add(reverifyAfter)}
	for _, c := range verifiedBy {
		if c.NotAfter.Before(v.until) {
			v.until = c.NotAfter
		}
	}
	for _, c := range chain[1:] {
		v.intermediates = append(v.intermediates, c.Raw)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := *f.known.Load()
	known := make(map[string]verifiedChain, len(old)+1)
	if len(old) < maxVerifiedChains {
		for k, e := range old {
			if !now.After(e.until) {
				known[k] = e
			}
		}
	}
	known[string(chain[0].Raw)] = v
	f.known.Store(&known)
}
