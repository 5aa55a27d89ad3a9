package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
)

const podsPath = "/apis/metrics.k8s.io/v1beta1/pods"

// answerServer is the real server over a cluster of n pods in ns-a (one container each), with a small reader
// cache (1 MiB: a full list of thousands of pods is not kept, so every one is an answer nothing keeps), the answer
// budget answerBytes and, when not 0, the request timeout.
func answerServer(t *testing.T, n int, answerBytes int64, requestTimeout time.Duration) *testServer {
	t.Helper()
	c := podCluster(t, n)
	ts := newTestServer(t, c.store, time.Unix(0, c.clock.Load()))
	ts.serve(t, Deps{Snapshots: c.store, Nodes: corelisters.NewNodeLister(c.nodes),
		Pods: cache.NewGenericLister(c.pods, podResource), ReaderCacheBytes: 1 << 20, AnswerBytes: answerBytes,
	}, func(cfg *genericapiserver.Config) {
		if requestTimeout > 0 {
			cfg.RequestTimeout = requestTimeout
		}
	})
	return ts
}

// allPods is the path of a list of every pod through a selector of its own (matching every pod): each such list
// is its own build, shared with no other request.
func allPods(selector string) string {
	return podsPath + "?labelSelector=" + url.QueryEscape("x!="+selector)
}

// stalledClient is an HTTP/2 client of user, on a connection of its own, that receives at most 64 KiB of a
// response it does not read: the server's writes of a larger answer block, as they do for a client that stopped
// reading.
func (ts *testServer) stalledClient(t *testing.T, user string) *http.Client {
	t.Helper()
	tlsConfig, err := rest.TLSConfigFor(ts.restConfig("", nil))
	if err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP2(true)
	tr := &http.Transport{TLSClientConfig: tlsConfig, Protocols: &protocols, DisableCompression: true,
		HTTP2: &http.HTTP2Config{MaxReceiveBufferPerConnection: 64 << 10, MaxReceiveBufferPerStream: 64 << 10}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Remote-User", user)
		r.Header.Set("X-Remote-Group", "system:masters")
		return tr.RoundTrip(r)
	})}
}

// stalled is a response whose body its client does not read, or the answer of a request refused.
type stalled struct {
	code       int
	retryAfter string
	body       string // of a refused request
	proto      int
}

// stall sends a GET of path that is never read past its headers; the test's end lets go of it.
func (ts *testServer) stall(t *testing.T, c *http.Client, path string) stalled {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.url+path, nil)
	if err != nil {
		t.Error(err)
		return stalled{}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", path, err)
		return stalled{}
	}
	t.Cleanup(func() { resp.Body.Close() })
	s := stalled{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), proto: resp.ProtoMajor}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		s.body = string(b)
	}
	return s
}

// TestUnreadAnswersBounded: tens of HTTP/2 clients of several users that never read their answers (each a list of
// 3,000 pods through a selector of its own, an answer nothing keeps) grow the heap by no more than the answer
// budget and some slack; those finding no room get 429 naming --answer-bytes, and another user's small list is
// still answered meanwhile. Before the budget, 40 such clients grew the heap by about 130 MiB.
func TestUnreadAnswersBounded(t *testing.T) {
	const budget = 8 << 20
	ts := answerServer(t, 3000, budget, 0)
	carol := ts.httpClient(t, "carol", []string{"system:masters"})
	before := heapInUse()
	var wg sync.WaitGroup
	answers := make([]stalled, 40)
	for i := range answers {
		c := ts.stalledClient(t, fmt.Sprintf("user-%d", i%10))
		wg.Go(func() { answers[i] = ts.stall(t, c, allPods(fmt.Sprint(i))) })
	}
	one := podsPath + "?fieldSelector=metadata.name%3Dp0001"
	if code, body := get(t, carol, ts.url+one, ""); code != 200 || !strings.Contains(body, `"name":"p0001"`) {
		t.Errorf("another user's list of one pod while 40 answers are unread: %d %s", code, trim(body))
	}
	wg.Wait()
	grown := heapGrowth(before, budget)
	served := 0
	for i, a := range answers {
		switch {
		case a.proto != 2:
			t.Fatalf("answer %d over HTTP/%d, want HTTP/2", i, a.proto)
		case a.code == 200:
			served++
		case a.code != 429 || a.retryAfter == "" || !strings.Contains(a.body, "--answer-bytes"):
			t.Errorf("answer %d: %d (Retry-After %q) %s, want 200 or 429 naming --answer-bytes", i, a.code,
				a.retryAfter, trim(a.body))
		}
	}
	t.Logf("%d of %d unread answers in flight, the heap grew by %d MiB", served, len(answers), grown>>20)
	if grown > budget+heapSlack {
		t.Errorf("40 unread answers grew the heap by %d MiB, want at most the budget (%d MiB) and %d MiB",
			grown>>20, budget>>20, heapSlack>>20)
	}
	if served == 0 {
		t.Error("no answer was served")
	}
	if code, body := get(t, carol, ts.url+one, ""); code != 200 || !strings.Contains(body, `"name":"p0001"`) {
		t.Errorf("another user's list of one pod after: %d %s", code, trim(body))
	}
}

// TestStalledReadersLetGoAtTheRequestTimeout: a client that never reads its answer holds its room in the answer
// budget only until its request times out (the write deadline, 1 s past the request's), so another user's large
// page, waiting for that room, is served soon after. Before the write deadline, the generic timeout filter waited
// on the blocked write for as long as the client kept its connection: every try got 504.
func TestStalledReadersLetGoAtTheRequestTimeout(t *testing.T) {
	const budget = 5 << 20 // a list of 3,000 pods, and not a page of 1,000 beside it
	ts := answerServer(t, 3000, budget, 3*time.Second)
	if a := ts.stall(t, ts.stalledClient(t, "alice"), allPods("alice")); a.code != 200 {
		t.Fatalf("alice's unread answer: %d %s", a.code, trim(a.body))
	}
	bob := ts.httpClient(t, "bob", []string{"system:masters"})
	var tries []string
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); { // a bound, not an assertion
		resp, err := bob.Get(ts.url + allPods("bob") + "&limit=1000")
		if err != nil {
			tries = append(tries, err.Error())
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == 200 {
			if !strings.Contains(string(body), `"name":"p0999"`) {
				t.Errorf("bob's page lacks pods: %s", trim(string(body)))
			}
			t.Logf("bob answered after %v", tries)
			return
		}
		tries = append(tries, fmt.Sprint(resp.StatusCode, err))
	}
	t.Errorf("bob's page never answered while alice's unread answer held the budget: %v", tries)
}

// TestTableOfItsOwnAnswer: the table of a list nothing keeps (as `kubectl get podmetrics` asks) is served even when
// the list took nearly all the answer budget: the table never waits for room its own list holds.
func TestTableOfItsOwnAnswer(t *testing.T) {
	const budget = 5 << 20 // the list of 3,000 pods, and not its table too
	ts := answerServer(t, 3000, budget, 0)
	admin := ts.httpClient(t, "alice", []string{"system:masters"})
	const table = "application/json;as=Table;g=meta.k8s.io;v=v1"
	code, body := get(t, admin, ts.url+allPods("table"), table)
	if code != 200 || !strings.Contains(body, `"kind":"Table"`) || !strings.Contains(body, `"cells":["p2999"`) {
		t.Errorf("a table of 3,000 pods: %d %s", code, trim(body))
	}
}

// TestTableOfItsOwnListWithinTheBudget (a review's finding): a table of a list nothing keeps (`kubectl get
// podmetrics` with a selector of its own) took its list's room within --answer-bytes, then forced its table's room
// past the budget, whether or not it fitted; a client that does not read its table holds both until the write
// deadline: one user held about 1.4 times the whole budget (with several users' lists filling the budget first,
// tables added up to about 3 budgets more). The pair now counts as one answer, capped at the budget, and waits
// for room in the whole budget.
func TestTableOfItsOwnListWithinTheBudget(t *testing.T) {
	const budget = 5 << 20 // the list of 3,000 pods fits, and not its table too (TestTableOfItsOwnAnswer)
	ts := answerServer(t, 3000, budget, 0)
	c := ts.stalledClient(t, "alice")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.url+allPods("table"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")
	resp, err := c.Do(req) // headers only: the body is never read, the server's write blocks
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("the table: %d", resp.StatusCode)
	}
	var held float64
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) { // a bound
		if held, err = testutil.GetGaugeMetricValue(answersInFlightBytes); err != nil {
			t.Fatal(err)
		} else if held > 0 {
			break
		}
	}
	if held > budget {
		t.Errorf("one user's unread table holds %.0f bytes of answers in flight, want at most --answer-bytes (%d)",
			held, budget)
	}
}
