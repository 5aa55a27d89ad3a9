package scraper

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// testScraper is a Scraper whose cycles go to a sink, as the collection loop would run them.
type testScraper struct {
	*Scraper
	sink sink
}

// sink is where a test's cycles go: a fakeStore, or real storage (stored).
type sink interface {
	cycle(ctx context.Context, s *Scraper)
}

// newScraper is New with the cycles going to sink.
func newScraper(o Options, nodes NodeLister, sink sink) (*testScraper, error) {
	s, err := New(o, nodes)
	if err != nil {
		return nil, err
	}
	return &testScraper{Scraper: s, sink: sink}, nil
}

// collect runs one cycle, as the loop does: within the scraper's budget, its batches and outcome to the sink.
func (s *testScraper) collect(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.Budget())
	defer cancel()
	s.sink.cycle(ctx, s.Scraper)
}

// stored is real storage as a sink: each cycle begun, appended to and committed.
type stored struct{ *storage.Storage }

func (st stored) cycle(ctx context.Context, s *Scraper) {
	c := st.BeginCycle()
	c.Commit(s.Collect(ctx, c.Append))
}

// fakeStore records deep copies of the batches it is given (the scraper reuses its batches) and the cycle ends.
type fakeStore struct {
	mu      sync.Mutex
	batches map[string]storage.Batch
	ends    []cycleEnd
	reject  storage.Rejection
}

type cycleEnd struct {
	success bool
	err     error
}

func newFakeStore() *fakeStore { return &fakeStore{batches: map[string]storage.Batch{}} }

func (f *fakeStore) Store(b *storage.Batch) storage.Rejection {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := *b
	c.Nodes, c.Containers = slices.Clone(b.Nodes), slices.Clone(b.Containers)
	f.batches[b.Key] = c
	return f.reject
}

func (f *fakeStore) cycle(ctx context.Context, s *Scraper) {
	o := s.Collect(ctx, f.Store)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ends = append(f.ends, cycleEnd{o.Success, o.Err})
}

func (f *fakeStore) lastEnd(t *testing.T) cycleEnd {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ends) == 0 {
		t.Fatal("no cycle ended")
	}
	return f.ends[len(f.ends)-1]
}

func (f *fakeStore) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var k []string
	for key := range f.batches {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

// fakeLister filters its nodes by the selector, like an informer's lister.
type fakeLister struct {
	mu    sync.Mutex
	nodes []*corev1.Node
	err   error
}

func (l *fakeLister) List(sel labels.Selector) ([]*corev1.Node, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*corev1.Node
	for _, n := range l.nodes {
		if sel.Matches(labels.Set(n.Labels)) {
			out = append(out, n)
		}
	}
	return out, l.err
}

// kubelet starts a TLS kubelet on 127.0.0.1 serving the 30-pod fixture at /metrics/resource, unless h is given.
func kubelet(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(orFixture(t, h))
	t.Cleanup(srv.Close)
	return srv
}

// orFixture is h, or when nil a handler serving the 30-pod fixture at /metrics/resource.
func orFixture(t *testing.T, h http.HandlerFunc) http.HandlerFunc {
	t.Helper()
	if h != nil {
		return h
	}
	body := readFixture(t, "metrics-resource-30pods.txt")
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics/resource" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(body)
	}
}

// nodeFor is a node whose InternalIP and status port point at srv.
func nodeFor(t testing.TB, name string, srv *httptest.Server) *corev1.Node {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: u.Hostname()}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	return n
}

// caFile writes srv's certificate as a PEM CA bundle.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	return writeFile(t, "ca.crt", caPEM(srv))
}

func caPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// cycle builds a scraper for nodes and runs one collection cycle. o.Port defaults to the first node's status port.
func cycle(t *testing.T, o Options, store *fakeStore, nodes ...*corev1.Node) *testScraper {
	t.Helper()
	if o.Port == 0 && !o.UseNodeStatusPort && len(nodes) > 0 {
		o.UseNodeStatusPort = true
	}
	s, err := newScraper(o, &fakeLister{nodes: nodes}, store)
	if err != nil {
		t.Fatal(err)
	}
	s.collect(context.Background())
	return s
}
