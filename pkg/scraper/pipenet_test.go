package scraper

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"

	"k8s.io/client-go/rest"
)

// pipeNet is an in-memory network for tests in a testing/synctest bubble, where real sockets would leave time
// stuck (a goroutine waiting on one is not durably blocked): kubelets listen on made-up 127.0.0.1 addresses and
// the scraper dials them over net.Pipe, through its real transport (TLS, keep-alive, deadlines) all the same.
type pipeNet struct {
	mu        sync.Mutex
	listeners map[string]*pipeListener
	port      int
}

func newPipeNet() *pipeNet { return &pipeNet{listeners: map[string]*pipeListener{}, port: 20000} }

// options is o with the scraper's connections dialed on n (rest.Config.Dial: kept by Options.restConfig).
func (n *pipeNet) options(o Options) Options {
	o.RESTConfig = &rest.Config{Dial: n.dial}
	return o
}

func (n *pipeNet) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[addr]
	n.mu.Unlock()
	if l == nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// kubelet is the package's kubelet helper on n: a TLS server running h (the fixture when nil), closed when the
// test ends.
func (n *pipeNet) kubelet(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	n.mu.Lock()
	n.port++
	l := &pipeListener{addr: fmt.Sprintf("127.0.0.1:%d", n.port), conns: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[l.addr] = l
	n.mu.Unlock()
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: orFixture(t, h)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// pipeListener accepts the connections pipeNet.dial makes to its address.
type pipeListener struct {
	addr  string
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(l.addr) }

type pipeAddr string

func (pipeAddr) Network() string  { return "tcp" }
func (a pipeAddr) String() string { return string(a) }

// closeIdle drops s's kept-alive kubelet connections, whose transport goroutines would otherwise outlive a bubble.
func closeIdle(t *testing.T, s *Scraper) {
	t.Helper()
	transportOf(t, s.client.rt).CloseIdleConnections()
}
