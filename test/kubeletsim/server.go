package kubeletsim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
)

// Fault makes a node misbehave: wait Delay (or until the client gives up), then, when Status or Body is set,
// answer Status (200 when zero) with Body instead of the real response. The zero value is a healthy node.
type Fault struct {
	Status int
	Delay  time.Duration
	Body   []byte
}

// serverState is one http.Server shared by every node's listener: the node is found from the connection's
// local port, so the request path takes no sim-wide lock.
type serverState struct {
	srv       *http.Server
	byPort    map[int]*node // read-only once serving starts
	listeners []net.Listener
	done      chan struct{}
}

type nodeCtxKey struct{}

// Start listens on Host:0 (or Host:PortBase+index) for every node of its shard (TLS, HTTP/2 and HTTP/1.1) and serves /metrics/resource,
// /metrics/cadvisor and /healthz. It returns once every listener is bound; cancelling ctx stops the sim, as does
// Stop. A sim starts once.
func (s *Sim) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("kubeletsim: Start called twice")
	}
	st := &serverState{byPort: make(map[int]*node, len(s.nodes)), done: make(chan struct{})}
	listeners := make([]net.Listener, 0, len(s.nodes))
	for _, n := range s.nodes {
		if !s.serves(n) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(s.cfg.Host, strconv.Itoa(n.port)))
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return fmt.Errorf("kubeletsim: listening for node %s on %s (raise ulimit -n for big clusters): %w",
				n.name, s.cfg.Host, err)
		}
		listeners = append(listeners, l)
		st.byPort[l.Addr().(*net.TCPAddr).Port] = n
	}
	st.srv = &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 30 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, nodeCtxKey{}, st.nodeOf(c.LocalAddr()))
		},
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
				n := st.nodeOf(hello.Conn.LocalAddr())
				if n == nil {
					return nil, fmt.Errorf("kubeletsim: no node on %s", hello.Conn.LocalAddr())
				}
				return s.certFor(n)
			},
		},
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		for _, l := range listeners {
			_ = l.Close()
		}
		return errors.New("kubeletsim: Start after Stop")
	}
	for port, n := range st.byPort {
		n.port = port
	}
	st.listeners = listeners
	s.server = st
	s.mu.Unlock()
	for _, l := range listeners {
		go func() {
			// ServeTLS (not Serve on a tls.Listener) so net/http negotiates HTTP/2 like a real kubelet.
			if err := st.srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "kubeletsim: serving stopped", "address", l.Addr().String())
			}
		}()
	}
	go func() {
		select {
		case <-ctx.Done():
			s.Stop()
		case <-st.done:
		}
	}()
	klog.V(2).InfoS("kubeletsim: serving", "nodes", len(s.nodes), "host", s.cfg.Host)
	return nil
}

func (st *serverState) nodeOf(a net.Addr) *node {
	if t, ok := a.(*net.TCPAddr); ok {
		return st.byPort[t.Port]
	}
	return nil
}

// Stop closes every listener and connection. It is idempotent and safe before Start.
func (s *Sim) Stop() {
	s.mu.Lock()
	st := s.server
	already := s.stopped
	s.stopped = true
	s.mu.Unlock()
	if already || st == nil {
		return
	}
	_ = st.srv.Close()
	// srv.Close closes only the listeners Serve has taken; one whose goroutine has not started yet would stay open
	// (accepting into its backlog) until it does. Closing them all here makes Stop final when it returns.
	for _, l := range st.listeners {
		_ = l.Close()
	}
	close(st.done)
}

// Port is the port a node listens on once started; 0 for unknown nodes or before Start.
func (s *Sim) Port(node string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if n, ok := s.byName[node]; ok {
		return n.port
	}
	return 0
}

// SetNodeFault makes a node misbehave until called again with the zero Fault; unknown nodes are ignored.
func (s *Sim) SetNodeFault(node string, f Fault) {
	n, ok := s.byName[node]
	if !ok {
		return
	}
	if f.Status == 0 && f.Delay == 0 && f.Body == nil {
		n.fault.Store(nil)
		return
	}
	n.fault.Store(&f)
}

func (s *Sim) handler() http.Handler {
	resource := func(n *node) http.Handler {
		if s.cfg.FastResource {
			return http.HandlerFunc(n.serveFastResource)
		}
		return n.resourceHandler()
	}
	cadvisor := func(n *node) http.Handler { return n.cadvisorHandler() }
	healthz := func(*node) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	}
	mux := http.NewServeMux()
	for path, h := range map[string]func(*node) http.Handler{
		"/metrics/resource": resource, "/metrics/cadvisor": cadvisor, "/healthz": healthz,
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			n, _ := r.Context().Value(nodeCtxKey{}).(*node)
			if n == nil {
				http.Error(w, "kubeletsim: request on an unknown listener", http.StatusInternalServerError)
				return
			}
			if n.down.Load() {
				panic(http.ErrAbortHandler) // a node that left: the connection breaks, as a shut-down node's would
			}
			if f := n.fault.Load(); f != nil && serveFault(w, r, f) {
				return
			}
			if f := n.farStart.Load(); f != nil && path == "/metrics/resource" {
				f.rewrite(h(n), w, r)
				return
			}
			h(n).ServeHTTP(w, r)
		})
	}
	return mux
}

// serveFault applies f and reports whether it answered the request itself.
func serveFault(w http.ResponseWriter, r *http.Request, f *Fault) bool {
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-r.Context().Done():
			return true
		case <-t.C:
		}
	}
	if f.Status == 0 && f.Body == nil {
		return false
	}
	status := f.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(f.Body)))
	w.WriteHeader(status)
	_, _ = w.Write(f.Body)
	return true
}

// The handlers are built on first use: a big sim's start-up then costs only listeners.
func (n *node) resourceHandler() http.Handler {
	n.resourceOnce.Do(func() {
		n.resourceH = metrics.HandlerFor(newResourceRegistry(n),
			metrics.HandlerOpts{ErrorHandling: metrics.ContinueOnError})
	})
	return n.resourceH
}

func (n *node) cadvisorHandler() http.Handler {
	n.cadvisorOnce.Do(func() {
		n.cadvisorH = metrics.HandlerFor(newCadvisorRegistry(n),
			metrics.HandlerOpts{ErrorHandling: metrics.ContinueOnError})
	})
	return n.cadvisorH
}
