package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestComponentSharedLists reads lists through the real server while they are shared between requests of one
// collection: every format and view of a shared list is what an unshared one would be, a namespace or selector
// never gets another request's list, a new collection is served at once, and concurrent readers of an empty or a
// full list race on nothing (run with -race); the versions share the list, never its bytes.
func TestComponentSharedLists(t *testing.T) {
	ts := startTestServer(t)
	admin := ts.httpClient(t, "alice", []string{"system:masters"})
	const pods, v1pods = "/apis/metrics.k8s.io/v1beta1/pods", "/apis/metrics.k8s.io/v1/pods"
	const table = "application/json;as=Table;g=meta.k8s.io;v=v1"

	_, first := get(t, admin, ts.url+pods, "")
	_, again := get(t, admin, ts.url+pods, "")
	if first != again || !strings.Contains(first, `"name":"web-1"`) || !strings.Contains(first, `"name":"db-1"`) {
		t.Fatalf("two lists of one collection differ or lack pods:\n%s\n%s", trim(first), trim(again))
	}
	views := []struct{ path, accept, want, notWant string }{
		{pods, table, `"cells":["web-1","150m","25Mi","15s"]`, ""},
		{pods, "application/vnd.kubernetes.protobuf", "PodMetricsList", ""},
		{pods, "application/yaml", "name: db-1", ""},
		{"/apis/metrics.k8s.io/v1beta1/namespaces/ns-a/pods", "", `"name":"web-1"`, `"db-1"`},
		{"/apis/metrics.k8s.io/v1beta1/namespaces/ns-b/pods", "", `"name":"db-1"`, `"web-1"`},
		{pods + "?labelSelector=app%3Dweb", "", `"name":"web-1"`, `"db-1"`},
		{pods + "?fieldSelector=metadata.name%3Ddb-1", "", `"name":"db-1"`, `"web-1"`},
		{pods + "?labelSelector=app%3Dnone", "", `"items":[]`, `"web-1"`},
		{pods, "", `"name":"web-1"`, ""}, // the full list is still intact after every other view
		// v1 reads the same build: its own encodings of the shared list, never v1beta1's bytes, and v1beta1 after it
		// still its own.
		{v1pods, "", `"apiVersion":"metrics.k8s.io/v1","metadata"`, "v1beta1"},
		{v1pods, "application/vnd.kubernetes.protobuf", "metrics.k8s.io/v1\x12\x0ePodMetricsList", "v1beta1"},
		{v1pods, table, `"cells":["web-1","150m","25Mi","15s"]`, ""},
		{v1pods + "?labelSelector=app%3Dweb", "", `"apiVersion":"metrics.k8s.io/v1"`, `"db-1"`},
		{pods, "", `"apiVersion":"metrics.k8s.io/v1beta1","metadata"`, `"metrics.k8s.io/v1"`},
		{pods, "application/vnd.kubernetes.protobuf", "metrics.k8s.io/v1beta1\x12\x0ePodMetricsList", ""},
	}
	for _, v := range views {
		code, body := get(t, admin, ts.url+v.path, v.accept)
		if code != 200 || !strings.Contains(body, v.want) || (v.notWant != "" && strings.Contains(body, v.notWant)) {
			t.Errorf("GET %s (%s): %d, want %q and not %q: %s", v.path, v.accept, code, v.want, v.notWant, trim(body))
		}
	}

	// The next collection: web-1's app container used 0.4 cores. The next list serves it.
	next := t0.Add(30 * time.Second)
	ts.clock.Set(next.Add(time.Second))
	feedPod(ts.store, next, 10+0.1*15+0.4*15)
	_, fresh := get(t, admin, ts.url+pods+"?labelSelector=app%3Dweb", table)
	if !strings.Contains(fresh, `"cells":["web-1","450m"`) {
		t.Errorf("after a collection the list still serves the previous one: %s", trim(fresh))
	}

	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			path := pods
			if i%2 == 1 {
				path += "?labelSelector=app%3Dnone"
			}
			if code, body := get(t, admin, ts.url+path, ""); code != 200 {
				t.Errorf("concurrent GET %s: %d %s", path, code, trim(body))
			}
		}(i)
	}
	wg.Wait()
}

// feedPod stores one collection at ts in which only web-1's app container moved, to cumulative cpu.
func feedPod(s *storage.Storage, ts time.Time, cpu float64) {
	cy := s.BeginCycle()
	cy.Append(&storage.Batch{Key: "node-a", CPU: storage.CPUCumulative, Containers: []storage.ContainerSample{
		{Namespace: "ns-a", Pod: "web-1", Container: "app", Sample: storage.Sample{Timestamp: ts, StartTime: t0.Add(-time.Hour), CPU: cpu, Memory: 20 << 20}},
		{Namespace: "ns-a", Pod: "web-1", Container: "sidecar", Sample: storage.Sample{Timestamp: ts, StartTime: t0.Add(-time.Hour), CPU: 5 + 0.05*30, Memory: 5 << 20}},
	}})
	cy.Commit(storage.Outcome{Success: true})
}

// TestListsSharedWithinOneCollection: requests of one collection with the same namespace and selectors get one
// list (built and encoded once); so do requests for one page, which is not the list; a new collection builds a new
// list.
func TestListsSharedWithinOneCollection(t *testing.T) {
	c := newCluster(t)
	c.addPod("ns-a", "p1")
	c.addPod("ns-b", "p1")
	c.cycle(nil, map[string]float64{"ns-a/p1": 0.1, "ns-b/p1": 0.3})
	s := c.podStorage()
	all := context.Background()
	nsA := genericapirequest.WithNamespace(all, "ns-a")
	list := func(ctx context.Context, opts *metainternalversion.ListOptions) any {
		t.Helper()
		obj, err := s.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	registerMetrics() // a component-base metric observes nothing until registered
	observed := func() uint64 {
		t.Helper()
		n, err := testutil.GetHistogramMetricCount(metricFreshness.ObserverMetric)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := observed()
	one, two := list(all, &metainternalversion.ListOptions{}), list(all, &metainternalversion.ListOptions{})
	if one != two {
		t.Error("two lists of all pods in one collection were built twice")
	}
	// Freshness counts each value of a shared list once, however many requests it serves.
	if got := observed() - before; got != 2 {
		t.Errorf("two requests for one shared list of 2 pods observed freshness %d times, want 2", got)
	}
	if a := list(nsA, &metainternalversion.ListOptions{}); a == one || len(podList(t, a).Items) != 1 {
		t.Errorf("the ns-a list is the all-namespaces list or wrong: %d items", len(podList(t, a).Items))
	}
	if l := list(all, listOpts(t, "app=x", "")); l == one {
		t.Error("a label-selected list is the unselected list")
	}
	p := list(all, &metainternalversion.ListOptions{Limit: 1})
	if p != list(all, &metainternalversion.ListOptions{Limit: 1}) || p == one || len(podList(t, p).Items) != 1 {
		t.Error("two requests for the first page of one collection got different pages, or the list")
	}
	c.cycle(nil, map[string]float64{"ns-a/p1": 0.2, "ns-b/p1": 0.3})
	// The previous collection's lists are let go when the new one lands, not when the next request comes.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if held := s.builds.fullLists(); held == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d lists of the previous collection still held 10 s after a new one landed", held)
		}
	}
	if three := list(all, &metainternalversion.ListOptions{}); three == one {
		t.Error("a new collection served the previous collection's list")
	}
}

// podList is a podREST list, shared or not.
func podList(t *testing.T, obj any) *metrics.PodMetricsList {
	t.Helper()
	switch l := obj.(type) {
	case *metrics.PodMetricsList:
		return l
	case *sharedPodList:
		return l.PodMetricsList
	case *leanList[storage.PodPoint]:
		return l.GetObject().(*metrics.PodMetricsList)
	}
	t.Fatalf("not a pod list: %T", obj)
	return nil
}

// TestListBuiltOnceUnderConcurrency: when a collection lands, concurrent requests for one list wait for a single
// build; a failed build is not kept, and a waiter whose request ends stops waiting.
func TestListBuiltOnceUnderConcurrency(t *testing.T) {
	c := newCluster(t)
	c.addPod("ns-a", "p1")
	c.cycle(nil, map[string]float64{"ns-a/p1": 0.1})
	k := &hookedKind[storage.PodPoint]{kind: podKind{pods: cache.NewGenericLister(c.pods, podResource)},
		block: make(chan struct{})}
	s := newMetricsREST[storage.PodPoint](c.store, k, newReaders(Deps{}))
	snap := c.store.Latest()
	var wg sync.WaitGroup
	got := make([]*build[storage.PodPoint], 50)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each its own user's: one user's waiters are capped (TestOneSelectionsWaitersCapped).
			ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: fmt.Sprint("user-", i)})
			b, err := s.builds.get(ctx, snap, scope{selectors: selectors{labels: labels.Everything()}})
			if err != nil {
				t.Error(err)
			}
			got[i] = b
		}()
	}
	// A waiter whose request is cancelled returns at once with its context's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for k.builds.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := s.builds.get(ctx, snap, scope{selectors: selectors{labels: labels.Everything()}}); err != context.Canceled {
		t.Errorf("a cancelled waiter: %v, want context.Canceled", err)
	}
	close(k.block)
	wg.Wait()
	if n := k.builds.Load(); n != 1 {
		t.Errorf("50 concurrent requests built the list %d times, want once", n)
	}
	for _, b := range got {
		if b != got[0] || b == nil || len(b.entries) != 1 {
			t.Fatal("concurrent requests got different builds")
		}
	}

	k.fail = errors.New("informer gone")
	sel := scope{namespace: "ns-a", selectors: selectors{labels: labels.Everything()}}
	if _, err := s.builds.get(context.Background(), snap, sel); err == nil {
		t.Fatal("a failed build returned no error")
	}
	k.fail = nil
	if _, err := s.builds.get(context.Background(), snap, sel); err != nil || k.builds.Load() != 3 {
		t.Errorf("after a failed build the next request did not build again: %v, %d builds", err, k.builds.Load())
	}
}
