package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// wholeBody decodes a response the way the client did before it streamed: all of it at once.
func wholeBody(t *testing.T, body []byte) (model.Vector, []string) {
	t.Helper()
	var env struct {
		Data struct {
			Result model.Vector `json:"result"`
		} `json:"data"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	return env.Data.Result, env.Warnings
}

func TestStreamDecodesAsBefore(t *testing.T) {
	sample := `{"metric":{"namespace":"ns","pod":"p","container":"app"},"value":[1795262400.123,"0.25"]}`
	for name, body := range map[string]string{
		"Prometheus' order": string(vectorBody(1000)),
		"warnings first, resultType last, unknown fields": `{"warnings":["partial response"],"infos":["x"],"status":"success",` +
			`"data":{"stats":{"timings":{"evalTotalTime":0.1}},"result":[` + sample + `,` + sample + `],"resultType":"vector"},"extra":null}`,
		"empty result":  `{"status":"success","data":{"resultType":"vector","result":[]}}`,
		"null warnings": `{"status":"success","warnings":null,"data":{"resultType":"vector","result":[` + sample + `]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			vec, warnings, err := decode(strings.NewReader(body), 200)
			if err != nil {
				t.Fatal(err)
			}
			wantVec, wantWarnings := wholeBody(t, []byte(body))
			if len(vec) != len(wantVec) || (len(vec) > 0 && !reflect.DeepEqual(vec, wantVec)) ||
				!reflect.DeepEqual(warnings, wantWarnings) {
				t.Fatalf("streamed %d samples, warnings %q; whole body %d, %q", len(vec), warnings, len(wantVec), wantWarnings)
			}
		})
	}
}

// Whatever the answer, the error says what was wrong in its own words; Prometheus' (and the decoder's quotes of
// the response) are log-only.
func TestDecodeErrorsCarryNoResponseBytes(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		timeout          bool
	}{
		{"HTML", `<html>secret proxy page</html>`, "HTTP 500: not a valid Prometheus API response", false},
		{"truncated", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"secret":"x"}`,
			"not a valid Prometheus API response", false},
		{"bad sample", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"secret"]}]}}`,
			"not a valid Prometheus API response", false},
		{"matrix", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"secret":"x"},"values":[]}]}}`,
			"query returned a matrix, want a vector", false},
		{"scalar after its result", `{"status":"success","data":{"result":[1,"2"],"resultType":"scalar"}}`,
			"not a valid Prometheus API response", false},
		{"odd resultType", `{"status":"success","data":{"resultType":"secret <b>","result":[]}}`,
			"query returned a (unrecognized), want a vector", false},
		{"API error", `{"status":"error","errorType":"bad_data","error":"parse error: secret label"}`,
			"Prometheus answered HTTP 500: bad_data", false},
		{"API timeout", `{"status":"error","errorType":"timeout","error":"query timed out: secret"}`,
			"Prometheus answered HTTP 500: timeout", true},
		{"odd errorType", `{"status":"error","errorType":"Secret Type","error":"x"}`,
			"Prometheus answered HTTP 500: (unrecognized)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decode(strings.NewReader(tc.body), 500)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, errTimeout) != tc.timeout {
				t.Fatalf("error %v, want %q (timeout %v)", err, tc.want, tc.timeout)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q carries the response's bytes", err)
			}
		})
	}
}

// A response over --prometheus-max-response-bytes is an error naming the cap, never a truncated success; one of
// exactly the cap decodes.
func TestResponseCap(t *testing.T) {
	body := vectorBody(100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(srv.Close)
	for _, limit := range []int64{int64(len(body)), math.MaxInt64, int64(len(body)) - 1, 512} {
		c, err := newClient(ClientOptions{URL: srv.URL, Timeout: 5 * time.Second, MaxResponseBytes: limit})
		if err != nil {
			t.Fatal(err)
		}
		vec, _, err := c.query(context.Background(), "q", time.Now())
		if limit >= int64(len(body)) {
			if err != nil || len(vec) != 100 {
				t.Errorf("cap %d = the response: %d samples, %v", limit, len(vec), err)
			}
			continue
		}
		if err == nil || !errors.Is(err, errTooLarge) || vec != nil ||
			!strings.Contains(err.Error(), "cap of "+strconv.FormatInt(limit, 10)+" bytes (--prometheus-max-response-bytes)") {
			t.Errorf("cap %d under the response's %d bytes: %d samples, %v", limit, len(body), len(vec), err)
		}
	}
}

func TestOversizedQueryIsCountedAndNamed(t *testing.T) {
	h := newHarness(t, Options{ClientOptions: ClientOptions{MaxResponseBytes: 2000}})
	var many []series
	for range 50 {
		many = append(many, ctrSeries("ns", "p", "app", "0.1"))
	}
	h.prom.results["container_cpu_usage_seconds_total"] = many
	counter := queriesTotal.WithLabelValues("container cpu", "error")
	before, _ := testutil.GetCounterMetricValue(counter)
	h.poll(0)
	if after, _ := testutil.GetCounterMetricValue(counter); after != before+1 {
		t.Errorf("queries_total{container cpu, error} went %v -> %v, want +1", before, after)
	}
	err := h.store.Latest().Unavailable()
	if err == nil || !strings.Contains(err.Error(), "container cpu query: reading response of") ||
		!strings.Contains(err.Error(), "response too large: over the cap of 2000 bytes") {
		t.Fatalf("unavailable = %v, want the container cpu query's cap", err)
	}
	if _, ok := h.store.Latest().Node("n1"); !ok {
		t.Error("the node queries' data was lost with the oversized container query")
	}
}

// panicky panics on the queries of one metric and passes the rest on: a bug in running one query.
type panicky struct {
	metric string
	next   http.RoundTripper
}

func (p panicky) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Query().Get("query"), p.metric) {
		var seen map[string]int
		//lint:ignore SA5000 a real runtime panic (its message and stack) is what the test checks
		seen[p.metric]++ // assignment to entry in nil map
	}
	return p.next.RoundTrip(r)
}

func TestQueryPanicLosesOnlyThatQuery(t *testing.T) {
	var logs logBuffer
	klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logs))))
	t.Cleanup(klog.ClearLogger)

	h := newHarness(t, Options{})
	h.adapter.client.http.Transport = panicky{metric: "node_cpu_usage_seconds_total", next: h.adapter.client.http.Transport}
	counter := queriesTotal.WithLabelValues("node cpu", "panic")
	before, _ := testutil.GetCounterMetricValue(counter)
	h.poll(0)
	h.poll(15 * time.Second)
	if after, _ := testutil.GetCounterMetricValue(counter); after != before+2 {
		t.Errorf("queries_total{node cpu, panic} went %v -> %v, want +2", before, after)
	}
	if _, ok := h.store.Latest().Pod("ns", "p"); !ok {
		t.Error("the container queries' data was lost with the query that panicked")
	}
	err := h.store.Latest().Unavailable()
	if err == nil || !strings.Contains(err.Error(), "node cpu query: running the query: panic") || strings.Contains(err.Error(), "nil map") {
		t.Fatalf("unavailable = %v, want the node cpu query's panic without its value", err)
	}
	if n := strings.Count(logs.String(), "assignment to entry in nil map"); n != 1 || !strings.Contains(logs.String(), "panicky.RoundTrip") {
		t.Errorf("want the panic logged once, with a stack through panicky.RoundTrip; %d times in:\n%s", n, logs.String())
	}
}

// logBuffer collects klog's lines for a test.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A Prometheus that redirects gets no second request: the token and headers go only to --prometheus-url.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var leaked sync.Mutex
	var got []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Lock()
		got = append(got, r.Header.Get("Authorization"))
		leaked.Unlock()
		w.Write(vectorBody(1))
	}))
	defer elsewhere.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	token := t.TempDir() + "/token"
	if err := os.WriteFile(token, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := newClient(ClientOptions{URL: redirector.URL, BearerTokenFile: token, Method: "GET", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.query(context.Background(), "up", time.Now())
	if err == nil || !strings.Contains(err.Error(), "307") {
		t.Errorf("query through a redirect: err = %v, want an error naming HTTP 307", err)
	}
	leaked.Lock()
	defer leaked.Unlock()
	if len(got) != 0 {
		t.Errorf("the redirect target got %d requests (Authorization %q), want none", len(got), got)
	}
}
