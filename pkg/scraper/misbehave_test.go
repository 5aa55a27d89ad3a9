package scraper

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// A kubelet that redirects gets an error naming the node, the URL and the status, and the host it names gets
// nothing: client-go's transport would add our bearer token to every hop.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var reached atomic.Int32
	var leaked atomic.Value
	leaked.Store("")
	elsewhere := kubelet(t, func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		leaked.Store(r.Header.Get("Authorization"))
		_, _ = w.Write(readFixture(t, "metrics-resource-30pods.txt"))
	})
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			redirecting := kubelet(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere.URL+"/metrics/resource", status)
			})
			store := newFakeStore()
			cycle(t, Options{InsecureTLS: true, RESTConfig: &rest.Config{BearerToken: "s3cret"}}, store,
				nodeFor(t, "redirecting", redirecting))
			end := store.lastEnd(t)
			if end.success || end.err == nil {
				t.Fatalf("a redirect succeeded: %v", end.err)
			}
			for _, want := range []string{`node "redirecting"`, redirecting.URL + "/metrics/resource",
				fmt.Sprintf("status %d %s", status, http.StatusText(status)), "redirects are not followed"} {
				if !strings.Contains(end.err.Error(), want) {
					t.Errorf("error %q does not mention %q", end.err, want)
				}
			}
			if kv := logonly.KV(end.err); len(kv) != 2 || kv[1] != elsewhere.URL+"/metrics/resource" {
				t.Errorf("log pairs %v: want the redirect's target", kv)
			}
		})
	}
	if n, auth := reached.Load(), leaked.Load(); n != 0 || auth != "" {
		t.Fatalf("the redirect's target got %d requests (Authorization %q), want none", n, auth)
	}
}

func TestMetricsPathAnnotation(t *testing.T) {
	for _, tc := range []struct {
		path string
		want string // "" = accepted
	}{
		{"/metrics/resource", ""},
		{"/metrics/resource/v1alpha1", ""},
		{"/api/v1/nodes/n/proxy/metrics/resource", ""},
		{"/x-y_z~:@!$&'()*+,;=", ""},
		{"metrics/resource", "not an absolute path"},
		{"https://attacker.example/metrics", "not an absolute path"},
		{"//attacker.example/metrics/resource", "names a host"},
		{"/metrics/../../etc", `has a ".." segment`},
		{"/..", `has a ".." segment`},
		{"/metrics/./resource", `has a "." segment`},
		{"/metrics/resource?token=x", "query or fragment"},
		{"/metrics/resource#frag", "query or fragment"},
		{"/metrics/%2e%2e/pods", `character '%' is not allowed`},
		{"/metrics\\..\\pods", `character '\\' is not allowed`},
		{"/metrics resource", `character ' ' is not allowed`},
		{"/metrics\r\nHost: x", `character '\r' is not allowed`},
		{"/métrics", `character 'é' is not allowed`},
		{"/" + strings.Repeat("a", maxPathBytes), "longer than 256 bytes"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			err := checkMetricsPath(tc.path)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("checkMetricsPath(%q) = %v, want %q", tc.path, err, tc.want)
			}
		})
	}
}

// A node with a refused path annotation fails alone, counted, logged once per streak; the others are scraped.
func TestRefusedPathFailsThatNode(t *testing.T) {
	logs := captureLogs(t)
	srv := kubelet(t, nil)
	bad := nodeFor(t, "bad-path", srv)
	bad.Annotations = map[string]string{AnnotationResourceMetricsPath: "/../../configz"}
	store := newFakeStore()
	errors0, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues(outcomeError))
	s := cycle(t, Options{InsecureTLS: true}, store, nodeFor(t, "good", srv), bad)
	s.collect(context.Background())
	end := store.lastEnd(t)
	want := `node "bad-path": annotation metrics.k8s.io/resource-metrics-path refused: has a ".." segment`
	if !end.success || end.err == nil || !strings.Contains(end.err.Error(), want) || strings.Contains(end.err.Error(), "configz") {
		t.Fatalf("cycle %v %v, want a success with the error %q, without the annotation's value", end.success, end.err, want)
	}
	if got := store.keys(); len(got) != 1 || got[0] != "good" {
		t.Errorf("stored %v, want only good", got)
	}
	if n, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues(outcomeError)); n != errors0+2 {
		t.Errorf("requests_total{outcome=error} went %v -> %v, want +2 (two cycles)", errors0, n)
	}
	klog.Flush()
	if n := strings.Count(logs.String(), "refused"); n != 1 || !strings.Contains(logs.String(), `annotation="/../../configz"`) {
		t.Errorf("%d log lines about the refused path over two cycles, want 1 quoting the annotation:\n%s", n, logs.String())
	}
}

// panicky panics on requests to one host and passes the rest on: a bug in the scrape of one node.
type panicky struct {
	host string
	next http.RoundTripper
}

func (p panicky) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host == p.host {
		var seen map[string]int
		//lint:ignore SA5000 a real runtime panic (its message and stack) is what the test checks
		seen[r.URL.Host]++ // assignment to entry in nil map
	}
	return p.next.RoundTrip(r)
}

func TestPanicLosesOnlyThatNode(t *testing.T) {
	logs := captureLogs(t)
	good, bad := kubelet(t, nil), kubelet(t, nil)
	store := newFakeStore()
	s, err := newScraper(Options{InsecureTLS: true, UseNodeStatusPort: true},
		&fakeLister{nodes: []*corev1.Node{nodeFor(t, "good", good), nodeFor(t, "panics", bad)}}, store)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(bad.URL)
	s.client.rt = panicky{host: u.Host, next: s.client.rt}
	panics0, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues(outcomePanic))
	s.collect(context.Background())
	s.collect(context.Background())

	end := store.lastEnd(t)
	if !end.success || !errors.Is(end.err, logonly.ErrPanic) || !strings.Contains(end.err.Error(), `1 of 2 nodes failed: node "panics": scrape: panic`) {
		t.Fatalf("cycle %v %v, want a success losing only the node that panicked", end.success, end.err)
	}
	if strings.Contains(end.err.Error(), "nil map") {
		t.Errorf("error %q carries the panic's value, which is for the log", end.err)
	}
	if got := store.keys(); len(got) != 1 || got[0] != "good" {
		t.Errorf("stored %v, want good", got)
	}
	if n, _ := testutil.GetCounterMetricValue(requestsTotal.WithLabelValues(outcomePanic)); n != panics0+2 {
		t.Errorf("requests_total{outcome=panic} went %v -> %v, want +2", panics0, n)
	}
	klog.Flush()
	out := logs.String()
	if n := strings.Count(out, "assignment to entry in nil map"); n != 1 || !strings.Contains(out, "panicky.RoundTrip") {
		t.Errorf("want the panic logged once with its stack through panicky.RoundTrip, got %d:\n%s", n, out)
	}
}

// The 503 text, built from the cycle's error, says what failed and why and never carries the kubelet's bytes.
func TestUnavailableCarriesNoResponseBytes(t *testing.T) {
	const secret = "password=hunter2"
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"500", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "db down: "+secret, http.StatusInternalServerError)
		}, "status 500 Internal Server Error"},
		{"not metrics", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("<html>" + secret + "</html>\n"))
		}, "no usable samples"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://127.0.0.1:1/?"+secret, http.StatusFound)
		}, "status 302 Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := kubelet(t, tc.handler)
			store := storage.New(storage.Options{Source: "kubelet"})
			s, err := newScraper(Options{InsecureTLS: true, UseNodeStatusPort: true},
				&fakeLister{nodes: []*corev1.Node{nodeFor(t, "n1", srv)}}, stored{store})
			if err != nil {
				t.Fatal(err)
			}
			s.collect(context.Background())
			err = store.Latest().Unavailable()
			if err == nil {
				t.Fatal("available after a failed first cycle")
			}
			for _, want := range []string{"kubelet source", "1 of 1 nodes failed", `node "n1"`, tc.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("503 text %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("503 text %q carries the kubelet's response", err)
			}
		})
	}
}

// panickyLister is a bug in listing the nodes, outside any one node's scrape.
type panickyLister struct {
	*fakeLister
	panics atomic.Bool
}

func (l *panickyLister) List(sel labels.Selector) ([]*corev1.Node, error) {
	if l.panics.Load() {
		var seen map[string]int
		//lint:ignore SA5000 a real runtime panic (its message and stack) is what the test checks
		seen["list"]++ // assignment to entry in nil map
	}
	return l.fakeLister.List(sel)
}

// A panic in the collection cycle outside any one node's scrape loses that cycle, as an error counted and logged
// with its stack once per streak, never the process; the next cycle scrapes again.
func TestCyclePanicLosesOnlyThatCycle(t *testing.T) {
	logs := captureLogs(t)
	lister := &panickyLister{fakeLister: &fakeLister{nodes: []*corev1.Node{nodeFor(t, "good", kubelet(t, nil))}}}
	lister.panics.Store(true)
	store := newFakeStore()
	s, err := newScraper(Options{InsecureTLS: true, UseNodeStatusPort: true}, lister, store)
	if err != nil {
		t.Fatal(err)
	}
	panics0, _ := testutil.GetCounterMetricValue(cyclePanics)
	s.collect(context.Background())
	s.collect(context.Background())
	end := store.lastEnd(t)
	if end.success || !errors.Is(end.err, logonly.ErrPanic) || !strings.Contains(end.err.Error(), "collection cycle: panic") ||
		strings.Contains(end.err.Error(), "nil map") {
		t.Fatalf("cycle %v %v: want a failure naming the cycle's panic, without its value", end.success, end.err)
	}
	if n, _ := testutil.GetCounterMetricValue(cyclePanics); n != panics0+2 {
		t.Errorf("metrics_ring_kubelet_cycle_panics_total went %v -> %v, want +2", panics0, n)
	}
	klog.Flush()
	if n := strings.Count(logs.String(), "assignment to entry in nil map"); n != 1 || !strings.Contains(logs.String(), "(*panickyLister).List") {
		t.Errorf("want the panic logged once with its stack through (*panickyLister).List, got %d:\n%s", n, logs.String())
	}
	lister.panics.Store(false)
	s.collect(context.Background())
	if end := store.lastEnd(t); !end.success || end.err != nil {
		t.Errorf("the cycle after: %v %v, want a success", end.success, end.err)
	}
}
