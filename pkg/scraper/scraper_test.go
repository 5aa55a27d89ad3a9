package scraper

import (
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestFailingKubelets checks that every way a kubelet can fail is an error naming it, while a healthy node in the
// same cycle is still stored and the cycle counts as a success.
func TestFailingKubelets(t *testing.T) {
	fixture := readFixture(t, "metrics-resource-30pods.txt")
	healthy := kubelet(t, nil)
	for _, tc := range []struct {
		name    string
		o       Options
		handler http.HandlerFunc
		node    func(*corev1.Node)
		want    []string
		hidden  []string // response bytes: in the log, never in the error (it becomes the 503 text)
	}{{
		name: "500",
		handler: func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "cadvisor is on fire", http.StatusInternalServerError)
		},
		want:   []string{"status 500 Internal Server Error"},
		hidden: []string{"cadvisor is on fire"},
	}, {
		name: "401: the kubelet rejects our credentials",
		handler: func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		},
		want: []string{"status 401 Unauthorized"},
	}, {
		name: "403: nodes/metrics not granted",
		handler: func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `Forbidden (user=system:serviceaccount:kube-system:metrics-ring, verb=get, resource=nodes, subresource=metrics)`, http.StatusForbidden)
		},
		want:   []string{"status 403 Forbidden"},
		hidden: []string{"subresource=metrics"},
	}, {
		name: "oversize with Content-Length",
		o:    Options{MaxResponseBytes: 40000}, // the healthy 30-pod response is 37703 bytes
		handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(2*len(fixture)))
			_, _ = w.Write(fixture)
			_, _ = w.Write(fixture)
		},
		want: []string{"response too large", "cap of 40000 bytes", "Content-Length 75406"},
	}, {
		name: "oversize streamed",
		o:    Options{MaxResponseBytes: 40000},
		handler: func(w http.ResponseWriter, _ *http.Request) {
			for range 100 { // chunked: no Content-Length to check up front
				_, _ = w.Write(fixture[:500])
				w.(http.Flusher).Flush()
			}
		},
		want: []string{"cap of 40000 bytes"},
	}, {
		name: "gzip that expands past the cap",
		o:    Options{MaxResponseBytes: 40000, Compression: true},
		handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = zw.Write(make([]byte, 10<<20)) // 10 MiB of zeros: about 10 KB on the wire
			_ = zw.Close()
		},
		want: []string{"response too large", "cap of 40000 bytes"},
	}, {
		name: "corrupt gzip",
		o:    Options{Compression: true},
		handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(fixture[:200])
		},
		want: []string{"reading gzip body", "invalid header"},
	}, {
		name: "unknown Content-Encoding",
		handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Encoding", "br")
			_, _ = w.Write(fixture)
		},
		want: []string{`unsupported Content-Encoding "br"`},
	}, {
		name: "truncated body",
		handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(fixture)))
			_, _ = w.Write(fixture[:len(fixture)/2])
			panic(http.ErrAbortHandler) // closes the connection mid-body
		},
		want: []string{"unexpected EOF"},
	}, {
		name:    "nothing usable",
		handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>proxy login</html>\n")) },
		want:    []string{"no usable samples", "1 bad lines"},
		hidden:  []string{"<", "proxy login"},
	}, {
		name: "no address",
		node: func(n *corev1.Node) { n.Status.Addresses = nil },
		want: []string{"no address of the preferred types"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			bad := kubelet(t, tc.handler)
			n := nodeFor(t, "bad-node", bad)
			if tc.node != nil {
				tc.node(n)
			}
			tc.o.InsecureTLS = true
			store := newFakeStore()
			cycle(t, tc.o, store, nodeFor(t, "good-node", healthy), n)
			end := store.lastEnd(t)
			if !end.success || end.err == nil {
				t.Fatalf("want a successful cycle with an error, got %v %v", end.success, end.err)
			}
			msg := end.err.Error()
			for _, w := range append(tc.want, `"bad-node"`, "1 of 2 nodes failed") {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			for _, h := range tc.hidden {
				if strings.Contains(msg, h) {
					t.Errorf("error %q carries the response's %q", msg, h)
				}
			}
			if strings.Contains(msg, "good-node") {
				t.Errorf("error %q blames the healthy node", msg)
			}
			if got := store.keys(); len(got) != 1 || got[0] != "good-node" {
				t.Errorf("stored %v, want only good-node", got)
			}
		})
	}
}

// TestSlowKubeletTimesOut: a kubelet that does not answer within --kubelet-request-timeout fails with a deadline
// error naming it, counted as a timeout, while a fast node in the same cycle is stored. Time is fake
// (testing/synctest), so the fast node always answers within the timeout and the slow one never does.
func TestSlowKubeletTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pn := newPipeNet()
		slow := pn.kubelet(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute): // answers, but long after the timeout
				_, _ = w.Write(readFixture(t, "metrics-resource-30pods.txt"))
			}
		})
		store := newFakeStore()
		before, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues(outcomeTimeout))
		s := cycle(t, pn.options(Options{InsecureTLS: true, Timeout: 2 * time.Second}), store,
			nodeFor(t, "slow", slow), nodeFor(t, "fast", pn.kubelet(t, nil)))
		closeIdle(t, s.Scraper)
		assertTimedOut(t, store, before, "slow", "fast")
	})
}

// TestHungKubeletTimesOutOverTheNetwork is TestSlowKubeletTimesOut on real connections: a kubelet that accepts
// the request and never answers is ended by the request's deadline through the transport, and what the kubelet
// sends as the connection goes (an empty 200 may still reach the transport) is a timeout too, never an empty
// body. Each cycle's only node hangs, so nothing depends on how fast the machine is.
func TestHungKubeletTimesOutOverTheNetwork(t *testing.T) {
	hung := kubelet(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	hangsAfterHeaders := kubelet(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	for _, srv := range []*httptest.Server{hung, hangsAfterHeaders} {
		for range 5 { // the empty answer's race was lost about once in three cycles under load
			store := newFakeStore()
			before, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues(outcomeTimeout))
			cycle(t, Options{InsecureTLS: true, Timeout: 100 * time.Millisecond}, store, nodeFor(t, "hung", srv))
			if end := store.lastEnd(t); end.success {
				t.Fatalf("the only node hung, yet the cycle succeeded: %v", end.err)
			}
			assertTimedOut(t, store, before, "hung", "")
		}
	}
}

// assertTimedOut checks the last cycle's error is a deadline error naming the node slow, counted once as a timeout,
// and that only fast (if any) was stored.
func assertTimedOut(t *testing.T, store *fakeStore, before float64, slow, fast string) {
	t.Helper()
	end := store.lastEnd(t)
	if !errors.Is(end.err, context.DeadlineExceeded) || !strings.Contains(end.err.Error(), strconv.Quote(slow)) {
		t.Fatalf("want a deadline error naming %s, got %v", slow, end.err)
	}
	if fast != "" && !end.success {
		t.Errorf("the cycle failed, though %s answered: %v", fast, end.err)
	}
	want := []string{}
	if fast != "" {
		want = []string{fast}
	}
	if got := store.keys(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("stored %v, want %v", got, want)
	}
	after, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues(outcomeTimeout))
	if after != before+1 {
		t.Errorf("timeouts counted %v -> %v, want one more", before, after)
	}
}

func TestNodeSelectorAndGoneNodes(t *testing.T) {
	var hitsA, hitsB atomic.Int32
	body := readFixture(t, "metrics-resource-30pods.txt")
	serve := func(hits *atomic.Int32) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { hits.Add(1); _, _ = w.Write(body) }
	}
	a, b := nodeFor(t, "sel-a", kubelet(t, serve(&hitsA))), nodeFor(t, "sel-b", kubelet(t, serve(&hitsB)))
	a.Labels["pool"], b.Labels["pool"] = "metrics", "metrics"
	other := nodeFor(t, "sel-other", kubelet(t, nil))

	lister := &fakeLister{nodes: []*corev1.Node{a, b, other}}
	store := newFakeStore()
	s, err := newScraper(Options{InsecureTLS: true, UseNodeStatusPort: true,
		NodeSelector: labels.SelectorFromSet(labels.Set{"pool": "metrics"})}, lister, store)
	if err != nil {
		t.Fatal(err)
	}
	s.collect(context.Background())
	if got := store.keys(); strings.Join(got, ",") != "sel-a,sel-b" {
		t.Fatalf("stored %v, want sel-a and sel-b only", got)
	}
	if !hasNodeSeries(t, "sel-b") {
		t.Fatal("no node_up series for sel-b")
	}

	lister.mu.Lock()
	lister.nodes = []*corev1.Node{a, other}
	lister.mu.Unlock()
	s.collect(context.Background())
	if hitsA.Load() != 2 || hitsB.Load() != 1 {
		t.Errorf("requests: sel-a %d, sel-b %d; want 2 and 1", hitsA.Load(), hitsB.Load())
	}
	if hasNodeSeries(t, "sel-b") || s.states["sel-b"] != nil {
		t.Error("sel-b left the lister but its metric series or state remain")
	}
	if !hasNodeSeries(t, "sel-a") {
		t.Error("sel-a's series went too")
	}
}

// hasNodeSeries reports whether /metrics has a per-node series for node.
func hasNodeSeries(t *testing.T, node string) bool {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "node" && l.GetValue() == node {
					return true
				}
			}
		}
	}
	return false
}

func TestCycleOutcomes(t *testing.T) {
	store := newFakeStore()
	cycle(t, Options{}, store)
	if end := store.lastEnd(t); !end.success || end.err != nil {
		t.Errorf("no nodes: want success without error, got %v %v", end.success, end.err)
	}
	s, _ := newScraper(Options{}, &fakeLister{err: errors.New("informer not synced")}, store)
	s.collect(context.Background())
	if end := store.lastEnd(t); end.success || !strings.Contains(end.err.Error(), "listing nodes: informer not synced") {
		t.Errorf("list error: got %v %v", end.success, end.err)
	}
	store = newFakeStore()
	cycle(t, Options{InsecureTLS: true, Port: 1}, store, nodeFor(t, "x", kubelet(t, nil)), nodeFor(t, "y", kubelet(t, nil)))
	if end := store.lastEnd(t); end.success || !strings.Contains(end.err.Error(), "2 of 2 nodes failed") {
		t.Errorf("every node failed: got %v %v", end.success, end.err)
	}
}

// Storage counts the samples it rejects (metrics_ring_storage_samples_rejected_total); the scraper only logs them.
func TestRejectionsCounted(t *testing.T) {
	store := newFakeStore()
	store.reject.Invalid, store.reject.Zero, store.reject.Example = 2, 1, "ns/pod/c: NaN"
	counter := invalidSamples.WithLabelValues("invalid")
	before, _ := testutil.GetCounterMetricValue(counter)
	cycle(t, Options{InsecureTLS: true}, store, nodeFor(t, "rej", kubelet(t, nil)))
	if after, _ := testutil.GetCounterMetricValue(counter); after != before {
		t.Errorf("storage's rejections counted again by the scraper: %v -> %v (storage counts them)", before, after)
	}
}

// TestBudget: a cycle is bounded by the request timeout (the default when none is given).
func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{10 * time.Second, 10 * time.Second},
		{900 * time.Millisecond, 900 * time.Millisecond},
		{0, defaultTimeout},
	} {
		s, err := New(Options{Timeout: tc.timeout}, &fakeLister{})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Budget(); got != tc.want {
			t.Errorf("timeout %v: budget %v, want %v", tc.timeout, got, tc.want)
		}
	}
}

// TestRetryOnlyUnreached: Retry (a warm-up's later rounds) scrapes only the nodes whose latest scrape failed and
// the ones never scraped, and counts only them in its outcome.
func TestRetryOnlyUnreached(t *testing.T) {
	fixture := readFixture(t, "metrics-resource-30pods.txt")
	var failing atomic.Bool
	failing.Store(true)
	hits := map[string]*atomic.Int32{"a": {}, "b": {}, "c": {}}
	serve := func(name string) *httptest.Server {
		return kubelet(t, func(w http.ResponseWriter, _ *http.Request) {
			hits[name].Add(1)
			if name == "b" && failing.Load() {
				http.Error(w, "not yet", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write(fixture)
		})
	}
	lister := &fakeLister{nodes: []*corev1.Node{nodeFor(t, "a", serve("a")), nodeFor(t, "b", serve("b"))}}
	s, err := New(Options{InsecureTLS: true, UseNodeStatusPort: true}, lister)
	if err != nil {
		t.Fatal(err)
	}
	discard := func(*storage.Batch) storage.Rejection { return storage.Rejection{} }
	if o := s.Collect(t.Context(), discard); o.Listed != 2 || o.Reached != 1 {
		t.Fatalf("first collection: %+v, want 1 of 2 reached", o)
	}
	lister.mu.Lock()
	lister.nodes = append(lister.nodes, nodeFor(t, "c", serve("c"))) // a node the first collection never saw
	lister.mu.Unlock()
	failing.Store(false)
	if o := s.Retry(t.Context(), discard); o.Listed != 2 || o.Reached != 2 {
		t.Errorf("retry: %+v, want the 2 unreached (b failed, c never scraped), both reached", o)
	}
	if o := s.Retry(t.Context(), discard); o.Listed != 0 {
		t.Errorf("retry with every node reached: %+v, want nothing tried", o)
	}
	for name, want := range map[string]int32{"a": 1, "b": 2, "c": 1} {
		if n := hits[name].Load(); n != want {
			t.Errorf("kubelet %s scraped %d times, want %d", name, n, want)
		}
	}
}
