package scraper

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/metrics-ring/metrics-ring/internal/testpki"
)

func TestTLSAndCredentials(t *testing.T) {
	var gotAuth, gotAccept atomic.Value
	body := readFixture(t, "metrics-resource-30pods.txt")
	srv := kubelet(t, func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		gotAccept.Store(r.Header.Get("Accept"))
		_, _ = w.Write(body)
	})
	// Every httptest server shares one certificate: a CA of the test's own does not sign the kubelet.
	otherCA := testpki.NewCA(t, "test-ca").CertPEM
	tokenFile := writeFile(t, "token", []byte("from-file\n"))

	for _, tc := range []struct {
		name     string
		o        Options
		wantErr  string // substring of the cycle error; "" = success
		wantAuth string
	}{
		{name: "CA file", o: Options{CAFile: caFile(t, srv)}},
		{name: "wrong CA fails clearly", o: Options{CAFile: writeFile(t, "other.crt", otherCA)}, wantErr: "certificate signed by unknown authority"},
		{name: "system roots do not trust the kubelet", o: Options{}, wantErr: "certificate"},
		{name: "insecure TLS", o: Options{InsecureTLS: true}},
		{name: "CA and bearer token from the kube config", o: Options{RESTConfig: &rest.Config{
			BearerToken: "s3cret", TLSClientConfig: rest.TLSClientConfig{CAData: caPEM(srv), ServerName: "kubernetes"},
		}}, wantAuth: "Bearer s3cret"},
		{name: "bearer token file", o: Options{InsecureTLS: true, RESTConfig: &rest.Config{BearerTokenFile: tokenFile}},
			wantAuth: "Bearer from-file"},
		{name: "insecure TLS overrides the kube config CA", o: Options{InsecureTLS: true, RESTConfig: &rest.Config{
			TLSClientConfig: rest.TLSClientConfig{CAData: otherCA},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotAuth.Store("")
			store := newFakeStore()
			cycle(t, tc.o, store, nodeFor(t, "tls-node", srv))
			end := store.lastEnd(t)
			if tc.wantErr != "" {
				if end.success || end.err == nil || !strings.Contains(end.err.Error(), tc.wantErr) ||
					!strings.Contains(end.err.Error(), `"tls-node"`) {
					t.Fatalf("want a failed cycle naming tls-node and %q, got %v %v", tc.wantErr, end.success, end.err)
				}
				if len(store.keys()) != 0 {
					t.Fatalf("stored %v from a failed node", store.keys())
				}
				return
			}
			if !end.success || end.err != nil {
				t.Fatalf("cycle failed: %v", end.err)
			}
			if b := store.batches["tls-node"]; len(b.Containers) != 60 || len(b.Nodes) != 1 {
				t.Fatalf("stored %d containers and %d nodes, want 60 and 1", len(b.Containers), len(b.Nodes))
			}
			if got := gotAuth.Load(); got != tc.wantAuth {
				t.Errorf("Authorization %q, want %q", got, tc.wantAuth)
			}
			if got := gotAccept.Load().(string); !strings.HasPrefix(got, "text/plain") {
				t.Errorf("Accept %q, want the text format", got)
			}
		})
	}
}

func TestClientCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "test-ca")
	client := ca.Client(t, "metrics-ring")
	certFile := writeFile(t, "client.crt", client.CertPEM)
	keyFile := writeFile(t, "client.key", client.KeyPEM)

	var who atomic.Value
	body := readFixture(t, "metrics-resource-30pods.txt")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		_, _ = w.Write(body)
	}))
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	store := newFakeStore()
	cycle(t, Options{CAFile: caFile(t, srv), ClientCertFile: certFile, ClientKeyFile: keyFile}, store, nodeFor(t, "n", srv))
	if end := store.lastEnd(t); !end.success || who.Load() != "metrics-ring" {
		t.Fatalf("with the client certificate: %v, peer %v", end.err, who.Load())
	}
	store = newFakeStore()
	cycle(t, Options{CAFile: caFile(t, srv)}, store, nodeFor(t, "n", srv))
	if end := store.lastEnd(t); end.success {
		t.Fatalf("a kubelet requiring a client certificate accepted none")
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"CA and insecure", Options{CAFile: "x", InsecureTLS: true}, "--kubelet-insecure-tls"},
		{"cert without key", Options{ClientCertFile: "x"}, "need both"},
		{"negative timeout", Options{Timeout: -1}, "kubelet-request-timeout should be positive"},
		{"negative concurrency", Options{Concurrency: -1}, "concurrency -1"},
		{"plain http with a CA", Options{Scheme: "http", CAFile: "x"},
			"cannot use both --kubelet-certificate-authority and --deprecated-kubelet-completely-insecure"},
		{"negative connection age", Options{ConnMaxAge: -time.Minute}, "kubelet-connection-max-age -1m0s should not be negative"},
		{"negative connection age over plain HTTP", Options{Scheme: "http", ConnMaxAge: -time.Minute},
			"kubelet-connection-max-age -1m0s should not be negative"},
		{"bad port", Options{Port: 70000}, "out of range"},
		{"bad scheme", Options{Scheme: "ftp"}, "ftp"},
		{"missing CA file", Options{CAFile: "/nonexistent/ca.crt"}, "ca.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newScraper(tc.o, &fakeLister{}, newFakeStore())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := newScraper(Options{}, nil, newFakeStore()); err == nil {
		t.Fatal("New accepted a nil lister")
	}
}

// TestKeepAlive checks that scrapes of a node reuse one connection, given up after --kubelet-connection-max-age:
// the scrape past the connection's drawn point closes it, and the next dials anew.
func TestKeepAlive(t *testing.T) {
	cases := []struct {
		name   string
		maxAge time.Duration
		plain  bool // --deprecated-kubelet-completely-insecure
		status int  // the kubelet's answer to every request, when not 200
		want   int32
	}{
		{name: "kept for as long as it lives", maxAge: 0, want: 1},
		{name: "younger than its maximum age", maxAge: time.Hour, want: 1},
		// The first scrape of a connection draws its point, the next is past it and closes it.
		{name: "older than its maximum age at every second scrape", maxAge: time.Nanosecond, want: 3},
		{name: "plain HTTP, kept whatever its age", maxAge: time.Nanosecond, plain: true, want: 1},
		// An error answered is an answer: the close is done, and the new connection gets its own age, rather than
		// every scrape of a node that keeps answering 401 costing a handshake.
		{name: "older than its maximum age, the kubelet answering 401", maxAge: time.Nanosecond,
			status: http.StatusUnauthorized, want: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var conns atomic.Int32
			body := readFixture(t, "metrics-resource-30pods.txt")
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tc.status != 0 {
					http.Error(w, http.StatusText(tc.status), tc.status)
					return
				}
				_, _ = w.Write(body)
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			o := Options{ConnMaxAge: tc.maxAge}
			if tc.plain {
				srv.Start()
				o.Scheme = "http"
			} else {
				srv.StartTLS()
				o.CAFile = caFile(t, srv)
			}
			t.Cleanup(srv.Close)
			store := newFakeStore()
			s := cycle(t, o, store, nodeFor(t, "n", srv))
			for range 5 {
				time.Sleep(time.Microsecond) // past a nanosecond's age on any clock
				s.collect(t.Context())
			}
			for i, end := range store.ends {
				if end.success != (tc.status == 0) {
					t.Fatalf("cycle %d: success %v, want %v: %+v", i, end.success, tc.status == 0, store.ends)
				}
			}
			if n := conns.Load(); n != tc.want {
				t.Errorf("6 scrapes opened %d connections, want %d", n, tc.want)
			}
		})
	}
}

// Kubelets are asked for gzip only with --kubelet-compression, and either way the samples arrive.
func TestCompression(t *testing.T) {
	body := readFixture(t, "metrics-resource-30pods.txt")
	for _, compression := range []bool{false, true} {
		var gzipped atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				_, _ = w.Write(body)
				return
			}
			gzipped.Add(1)
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = zw.Write(body)
			_ = zw.Close()
		}))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		store := newFakeStore()
		cycle(t, Options{CAFile: caFile(t, srv), Compression: compression}, store, nodeFor(t, "n", srv))
		srv.Close()
		if want := map[bool]int32{false: 0, true: 1}[compression]; gzipped.Load() != want {
			t.Errorf("compression %v: %d gzip responses, want %d", compression, gzipped.Load(), want)
		}
		if n := len(store.batches["n"].Containers); len(store.ends) != 1 || !store.ends[0].success || n != 60 {
			t.Errorf("compression %v: cycles %+v, %d containers stored, want 60", compression, store.ends, n)
		}
	}
}

// Kubelets offer HTTP/2, but each is asked over HTTP/1.1, which costs less memory per kept-alive connection.
func TestKubeletsAreAskedOverHTTP1(t *testing.T) {
	body := readFixture(t, "metrics-resource-30pods.txt")
	var protos sync.Map
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos.Store(r.Proto, true)
		_, _ = w.Write(body)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	store := newFakeStore()
	cycle(t, Options{CAFile: caFile(t, srv)}, store, nodeFor(t, "n", srv))
	var got []string
	protos.Range(func(k, _ any) bool { got = append(got, k.(string)); return true })
	if len(got) != 1 || got[0] != "HTTP/1.1" {
		t.Errorf("kubelet asked over %v, want only HTTP/1.1", got)
	}
	if n := len(store.batches["n"].Containers); n != 60 {
		t.Errorf("%d containers stored, want 60", n)
	}
}

// Each kept-alive kubelet connection holds smaller buffers than net/http's defaults, and requests and responses
// larger than them still go through whole: a bearer token longer than the write buffer, response headers longer
// than the read buffer, a gzip body in many chunks, on one connection scrape after scrape. Whether or not the
// kubelet configuration makes client-go wrap the transport (a CA file it reloads, a token file), the buffer sizes
// reach the *http.Transport beneath, and the process-wide http.DefaultTransport is never touched.
func TestSmallConnectionBuffers(t *testing.T) {
	body := readFixture(t, "metrics-resource-30pods.txt")
	token := strings.Repeat("t", 3*connWriteBuffer)
	var gotAuth atomic.Value
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		w.Header().Set("X-Padding", strings.Repeat("p", 3*connReadBuffer))
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		for chunk := range slices.Chunk(body, 700) {
			_, _ = zw.Write(chunk)
			_ = zw.Flush()
			w.(http.Flusher).Flush()
		}
		_ = zw.Close()
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	defaultWrite, defaultRead := http.DefaultTransport.(*http.Transport).WriteBufferSize,
		http.DefaultTransport.(*http.Transport).ReadBufferSize
	for _, o := range []Options{
		{CAFile: caFile(t, srv), Compression: true, RESTConfig: &rest.Config{BearerToken: token}},
		{InsecureTLS: true, Compression: true, RESTConfig: &rest.Config{BearerTokenFile: writeFile(t, "token", []byte(token))}},
	} {
		conns.Store(0)
		store := newFakeStore()
		s := cycle(t, o, store, nodeFor(t, "n", srv))
		s.collect(t.Context())
		if len(store.ends) != 2 || !store.ends[1].success {
			t.Fatalf("cycles: %+v", store.ends)
		}
		if n := len(store.batches["n"].Containers); n != 60 {
			t.Errorf("%d containers stored, want 60", n)
		}
		if got := gotAuth.Load(); got != "Bearer "+token {
			t.Errorf("Authorization header of %d bytes, want the %d-byte token", len(got.(string)), len(token))
		}
		if n := conns.Load(); n != 1 {
			t.Errorf("2 scrapes opened %d connections, want 1", n)
		}
		tr := transportOf(t, s.Scraper.client.rt)
		if tr.WriteBufferSize != connWriteBuffer || tr.ReadBufferSize != connReadBuffer {
			t.Errorf("kubelet transport buffers %d/%d, want %d/%d", tr.WriteBufferSize, tr.ReadBufferSize,
				connWriteBuffer, connReadBuffer)
		}
	}
	plain, err := newKubeletClient(&Options{Scheme: "http"})
	if err != nil {
		t.Fatal(err)
	}
	if tr := transportOf(t, plain.rt); tr == http.DefaultTransport || tr.WriteBufferSize != connWriteBuffer {
		t.Errorf("plain HTTP uses the default transport or its buffers (%d), want a transport of its own", tr.WriteBufferSize)
	}
	if d := http.DefaultTransport.(*http.Transport); d.WriteBufferSize != defaultWrite || d.ReadBufferSize != defaultRead {
		t.Errorf("http.DefaultTransport's buffers changed to %d/%d", d.WriteBufferSize, d.ReadBufferSize)
	}
}

// transportOf returns the *http.Transport beneath rt's client-go wrappers.
func transportOf(t *testing.T, rt http.RoundTripper) *http.Transport {
	t.Helper()
	for {
		switch v := rt.(type) {
		case *http.Transport:
			return v
		case utilnet.RoundTripperWrapper:
			rt = v.WrappedRoundTripper()
		default:
			t.Fatalf("no *http.Transport beneath %T", rt)
		}
	}
}

// slowHandshakeListener delays each connection's first read, the TLS handshake's, so a dial outlives a short request.
type slowHandshakeListener struct {
	net.Listener
	delay time.Duration
}

func (l slowHandshakeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &slowFirstRead{Conn: c, delay: l.delay}, nil
}

type slowFirstRead struct {
	net.Conn
	delay time.Duration
	once  sync.Once
}

func (c *slowFirstRead) Read(p []byte) (int, error) {
	c.once.Do(func() { time.Sleep(c.delay) })
	return c.Conn.Read(p)
}

// TestOneConnectionPerKubelet: a scrape that times out while its connection is still being set up (a kubelet slow
// to handshake, or a warm-up round ended by the pods' sync) leaves the dial to finish, and the next scrape of that
// kubelet waits for it rather than opening a second connection: one handshake and one connection a kubelet.
func TestOneConnectionPerKubelet(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Listener = slowHandshakeListener{Listener: srv.Listener, delay: 300 * time.Millisecond}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c, err := newKubeletClient(&Options{InsecureTLS: true})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: c.rt}
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	if err := get(50 * time.Millisecond); err == nil {
		t.Fatal("a request shorter than the handshake succeeded: the test's kubelet is not slow")
	}
	if err := get(5 * time.Second); err != nil {
		t.Fatalf("the next request: %v", err)
	}
	if err := get(5 * time.Second); err != nil {
		t.Fatalf("a third request: %v", err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections opened to one kubelet, want 1", n)
	}
}

// lateRoundTripper answers after its request's context has ended, with a 200 and an empty body: what a kubelet
// that gave up on a cancelled request can send while the transport is still waiting for the response.
type lateRoundTripper struct{}

func (lateRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")),
		ContentLength: -1, Request: req}, nil
}

// A response that ends after the scrape's deadline is a timeout (counted and logged as one), never an empty body
// read as "no usable samples": under load the kubelet's empty answer to a cancelled request sometimes won the race.
func TestFetchPastItsDeadlineIsATimeout(t *testing.T) {
	c, err := newKubeletClient(&Options{InsecureTLS: true})
	if err != nil {
		t.Fatal(err)
	}
	c.rt = lateRoundTripper{}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	_, err = c.fetch(ctx, "slow", target{url: "https://127.0.0.1:1/metrics/resource", shown: "https://127.0.0.1:1/metrics/resource"},
		nil, &readers{}, newBuffers(1), 0)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"slow"`) {
		t.Fatalf("fetch past its deadline: %v, want a deadline error naming the node", err)
	}
}
