package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// series is one result series of the fake Prometheus.
type series struct {
	labels map[string]string
	value  string
}

// fakeProm answers /api/v1/query by matching the query's metric name. Its fields change its behaviour.
type fakeProm struct {
	mu       sync.Mutex
	results  map[string][]series // metric name -> result
	status   int                 // non-200: answer an API error (or raw) with this status
	raw      string              // with status: the body instead of the API error
	warnings []string
	hang     chan struct{}  // non-nil: block until closed or the request is cancelled
	failing  map[string]int // metric name -> status of an API error answered to its queries
	requests []*http.Request
	forms    []map[string][]string
}

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f.mu.Lock()
	f.requests = append(f.requests, r)
	f.forms = append(f.forms, r.Form)
	status, raw, warnings, hang := f.status, f.raw, f.warnings, f.hang
	var result []series
	for name, s := range f.results {
		if strings.Contains(r.Form.Get("query"), name+"{") {
			result = s
			if st, ok := f.failing[name]; ok {
				status = st
			}
		}
	}
	f.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		return
	}
	if status != 0 {
		w.WriteHeader(status)
		if raw == "" {
			raw = `{"status":"error","errorType":"execution","error":"query processing would load too many samples"}`
		}
		fmt.Fprint(w, raw)
		return
	}
	ts := r.Form.Get("time")
	out := []map[string]any{}
	for _, s := range result {
		out = append(out, map[string]any{"metric": s.labels, "value": []any{json.RawMessage(ts), s.value}})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "warnings": warnings,
		"data": map[string]any{"resultType": "vector", "result": out}})
}

func ctrSeries(ns, pod, container, v string) series {
	return series{map[string]string{"namespace": ns, "pod": pod, "container": container}, v}
}

func nodeSeries(node, v string) series { return series{map[string]string{"node": node}, v} }

func healthyResults() map[string][]series {
	return map[string][]series{
		"container_cpu_usage_seconds_total":  {ctrSeries("ns", "p", "app", "0.123456789"), ctrSeries("ns", "p", "sidecar", "0")},
		"container_memory_working_set_bytes": {ctrSeries("ns", "p", "app", "1048576"), ctrSeries("ns", "p", "sidecar", "4096")},
		"node_cpu_usage_seconds_total":       {nodeSeries("n1", "1.5")},
		"node_memory_working_set_bytes":      {nodeSeries("n1", "3221225472")},
	}
}

type harness struct {
	prom    *fakeProm
	server  *httptest.Server
	store   *storage.Storage
	adapter *Adapter
	now     time.Time
}

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	h := &harness{prom: &fakeProm{results: healthyResults()}, now: time.Now()}
	h.server = httptest.NewServer(h.prom)
	t.Cleanup(h.server.Close)
	clock := func() time.Time { return h.now }
	h.store = storage.New(storage.Options{Source: "prometheus", Resolution: 15 * time.Second, Now: clock})
	// The pods the fake Prometheus reports are Running, as the pod informer would tell storage; whether their
	// values are served is then the adapter's and storage's to decide.
	for _, pod := range []string{"p", "nan", "cpu-only"} {
		h.store.PodBound("ns", pod, "n1")
	}
	o.URL, o.Now = h.server.URL, clock
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.adapter = a
	return h
}

// setTimeout replaces the harness' adapter by one with the given Prometheus timeout, polling the same Prometheus
// into the same storage.
func (h *harness) setTimeout(t *testing.T, d time.Duration) {
	t.Helper()
	a, err := New(Options{ClientOptions: ClientOptions{URL: h.server.URL, Timeout: d}, Now: func() time.Time { return h.now }})
	if err != nil {
		t.Fatal(err)
	}
	h.adapter = a
}

func (h *harness) poll(after time.Duration) {
	h.now = h.now.Add(after)
	// As the collection loop runs a cycle: within the adapter's budget, into a storage cycle, its outcome committed.
	ctx, cancel := context.WithTimeout(context.Background(), h.adapter.Budget())
	defer cancel()
	c := h.store.BeginCycle()
	c.Commit(h.adapter.Collect(ctx, c.Append))
}

func TestPollServesPrometheusNumbers(t *testing.T) {
	h := newHarness(t, Options{})
	h.poll(0)
	p, ok := h.store.Latest().Pod("ns", "p")
	if !ok || len(p.Containers()) != 2 {
		t.Fatalf("pod not served after one poll: %+v %v (health %+v)", p, ok, h.store.Latest().Health())
	}
	if p.Containers()[0].CPU != 123_456_789 || p.Containers()[0].Memory != 1<<20 || p.Containers()[1].CPU != 0 {
		t.Errorf("containers = %+v: want nanocore precision, memory exact, an idle sidecar at 0", p.Containers())
	}
	if p.Window != time.Minute {
		t.Errorf("window = %s, want the default query's range 1m", p.Window)
	}
	if n, ok := h.store.Latest().Node("n1"); !ok || n.CPU != 1_500_000_000 || n.Memory != 3<<30 {
		t.Errorf("node = %+v %v", n, ok)
	}
	if err := h.store.Latest().Unavailable(); err != nil {
		t.Errorf("unavailable after a good poll: %v", err)
	}
}

func TestRequestOptions(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"GET", "POST"} {
		t.Run(method, func(t *testing.T) {
			h := newHarness(t, Options{ClientOptions: ClientOptions{Method: method, BearerTokenFile: token,
				Headers: map[string]string{"X-Scope-OrgID": "team-a"}, Timeout: 7 * time.Second}})
			h.poll(0)
			if len(h.prom.requests) != 6 {
				t.Fatalf("%d requests, want 6 (one per query: cpu, memory and swap of containers and nodes)", len(h.prom.requests))
			}
			r, form := h.prom.requests[0], h.prom.forms[0]
			if r.Method != method || r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Scope-OrgID") != "team-a" {
				t.Errorf("request %s auth=%q org=%q", r.Method, r.Header.Get("Authorization"), r.Header.Get("X-Scope-OrgID"))
			}
			if form["timeout"][0] != "7s" || form["time"][0] == "" {
				t.Errorf("form = %v: want Prometheus' own timeout=7s and an evaluation time", form)
			}
		})
	}
}

func TestFailuresAreNeverSilent(t *testing.T) {
	cases := []struct {
		name        string
		break_      func(f *fakeProm)
		wantErr     string
		wantOutcome string // of the node cpu query in metrics_ring_prometheus_queries_total
	}{
		{"Prometheus answers an error", func(f *fakeProm) { f.status = 422 }, "Prometheus answered HTTP 422: execution", "error"},
		{"a proxy answers", func(f *fakeProm) { f.status, f.raw = 502, "<html>502 Bad Gateway</html>" },
			"HTTP 502: not a valid Prometheus API response", "error"},
		{"Prometheus is down", nil, "connection refused", "error"},
		{"a query returns nothing", func(f *fakeProm) { delete(f.results, "node_cpu_usage_seconds_total") }, "node cpu query: query returned no data", "error"},
		{"Prometheus hangs", func(f *fakeProm) { f.hang = make(chan struct{}) }, "timed out", "timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{ClientOptions: ClientOptions{Timeout: 10 * time.Second}})
			h.poll(0)
			if _, ok := h.store.Latest().Pod("ns", "p"); !ok {
				t.Fatal("healthy poll not served")
			}
			if tc.wantOutcome == "timeout" {
				// The timeout is the failure: a short one, set only now, so that the healthy poll (and every other
				// case's answer) has room on a loaded machine.
				h.setTimeout(t, 200*time.Millisecond)
			}
			if tc.break_ != nil {
				h.prom.mu.Lock()
				tc.break_(h.prom)
				h.prom.mu.Unlock()
			} else {
				h.server.Close()
			}
			counter := queriesTotal.WithLabelValues("node cpu", tc.wantOutcome)
			before, _ := testutil.GetCounterMetricValue(counter)
			h.poll(15 * time.Second)
			if after, _ := testutil.GetCounterMetricValue(counter); after != before+1 {
				t.Errorf("metrics_ring_prometheus_queries_total{query=node cpu,outcome=%s} went %v -> %v, want +1", tc.wantOutcome, before, after)
			}
			if err := h.store.Latest().Unavailable(); err != nil {
				t.Fatalf("one failed poll within stale-after must keep serving: %v", err)
			}
			if _, ok := h.store.Latest().Pod("ns", "p"); !ok {
				t.Error("last good data not served within stale-after")
			}
			for i := 0; i < 3; i++ {
				h.poll(15 * time.Second)
			}
			err := h.store.Latest().Unavailable()
			if err == nil || !strings.Contains(err.Error(), "prometheus") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("after stale-after: unavailable = %v, want a reason naming prometheus and %q", err, tc.wantErr)
			}
			// The 503 text every namespace reader sees has no bytes of Prometheus' answer: they are in the log.
			if strings.Contains(err.Error(), "too many samples") || strings.Contains(err.Error(), "Bad Gateway") {
				t.Errorf("503 text %q carries Prometheus' answer", err)
			}
			if h.prom.hang != nil {
				close(h.prom.hang)
			}
		})
	}
}

func TestWarningsNaNDuplicatesAndPartialVectors(t *testing.T) {
	h := newHarness(t, Options{})
	h.prom.warnings = []string{"partial response: store gateway unavailable"}
	h.prom.results["container_cpu_usage_seconds_total"] = []series{
		ctrSeries("ns", "p", "app", "0.25"), ctrSeries("ns", "p", "app", "0.5"), // duplicate: max wins
		ctrSeries("ns", "nan", "app", "NaN"),
		ctrSeries("ns", "cpu-only", "app", "0.1"),
		ctrSeries("", "no-namespace", "app", "0.1"),
	}
	h.prom.results["container_memory_working_set_bytes"] = []series{
		ctrSeries("ns", "p", "app", "1048576"), ctrSeries("ns", "nan", "app", "4096")}
	h.poll(0)
	if p, ok := h.store.Latest().Pod("ns", "p"); !ok || p.Containers()[0].CPU != 500_000_000 {
		t.Errorf("duplicate series: got %+v %v, want the larger value 0.5 cores", p, ok)
	}
	for _, pod := range []string{"nan", "cpu-only", "no-namespace"} {
		if p, ok := h.store.Latest().Pod("ns", pod); ok {
			t.Errorf("pod %s served: %+v", pod, p)
		}
	}
	if err := h.store.Latest().Unavailable(); err != nil {
		t.Errorf("a poll with warnings still has data: %v", err)
	}
}

// TestNoDataWithWarningsBlamesTheStores: Thanos answers 200 with nothing and a warning when every store is down.
// The error (the 503's text) says so instead of blaming the config, and the warnings, which name internal
// addresses, are for the log line only.
func TestNoDataWithWarningsBlamesTheStores(t *testing.T) {
	const warning = "fetch series for Store Gateway Addr: 10.1.2.3:10901: connection refused"
	for name, tc := range map[string]struct {
		warnings       []string
		want, wantNot  string
		wantLoggedWarn bool
	}{
		"no warnings":   {want: "check that Prometheus scrapes the kubelets", wantNot: "warning"},
		"with warnings": {warnings: []string{warning}, want: "1 warning(s), a partial response", wantNot: "10.1.2.3", wantLoggedWarn: true},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.prom.results, h.prom.warnings = map[string][]series{}, tc.warnings
			h.poll(0)
			err := h.store.Latest().Unavailable()
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.wantNot) {
				t.Fatalf("Unavailable() = %v, want an error saying %q and not %q", err, tc.want, tc.wantNot)
			}
			kv := fmt.Sprint(logonly.KV(err))
			if got := strings.Contains(kv, warning); got != tc.wantLoggedWarn {
				t.Errorf("log-only pairs %s: holding the warning %v, want %v", kv, got, tc.wantLoggedWarn)
			}
		})
	}
}
