package api

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	apistorage "k8s.io/apiserver/pkg/storage"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// cluster is real storage fed cycle by cycle, with informer-like indexes the test edits.
type cluster struct {
	t     *testing.T
	clock atomic.Int64 // storage's clock in nanoseconds: watches read it concurrently
	store *storage.Storage
	nodes cache.Indexer
	pods  cache.Indexer
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t,
		nodes: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		pods:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
	}
	c.clock.Store(sampleTime.UnixNano())
	c.store = storage.New(storage.Options{Source: "prometheus", Resolution: 15 * time.Second,
		Now: func() time.Time { return time.Unix(0, c.clock.Load()) },
		// A removal's publication waits for the next cycle (storage's timer never fires): a test sees one
		// snapshot from a deletion to its next cycle, however slowly it runs.
		AfterFunc: func(time.Duration, func()) {}})
	return c
}

// cycle advances the clock by one resolution and stores one cluster-wide batch of CPU rates (cores) per node and
// per pod (one container "app" each), as the Prometheus source does.
func (c *cluster) cycle(nodeCPU map[string]float64, podCPU map[string]float64) uint64 {
	now := time.Unix(0, c.clock.Add(int64(15*time.Second)))
	b := &storage.Batch{CPU: storage.CPURate, Window: time.Minute}
	for n, cpu := range nodeCPU {
		b.Nodes = append(b.Nodes, storage.NodeSample{Node: n, Sample: storage.Sample{Timestamp: now, CPU: cpu, Memory: 1 << 30}})
	}
	for key, cpu := range podCPU {
		ns, name := splitKey(key)
		b.Containers = append(b.Containers, storage.ContainerSample{Namespace: ns, Pod: name, Container: "app",
			Sample: storage.Sample{Timestamp: now, CPU: cpu, Memory: 1 << 20}})
	}
	cy := c.store.BeginCycle()
	cy.Append(b)
	cy.Commit(storage.Outcome{Success: true})
	return c.store.Latest().Generation()
}

func splitKey(key string) (string, string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

func (c *cluster) nodeStorage() *nodeREST {
	return nodeRESTOf(c.store, corelisters.NewNodeLister(c.nodes), nil)
}

func (c *cluster) podStorage() *podREST {
	return podRESTOf(c.store, cache.NewGenericLister(c.pods, podResource))
}

func (c *cluster) addNode(name string, lbls map[string]string) { _ = c.nodes.Add(node(name, lbls)) }

// addPod adds a Running pod to the pod informer, which tells storage (as cmd wires it).
func (c *cluster) addPod(ns, name string) {
	_ = c.pods.Add(podMeta(ns, name, nil))
	c.store.PodBound(ns, name, "node-a")
}

// next returns the watch's next event, failing the test when none comes in a generous bound (the events are due
// immediately; the bound only keeps a broken watch from hanging the test). A shared event object is unwrapped into
// the object its encodings are made from.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		if co, ok := ev.Object.(runtime.CacheableObject); ok {
			ev.Object = co.GetObject()
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	return watch.Event{}
}

// events reads n events into "TYPE name" strings, in any order.
func events(t *testing.T, w watch.Interface, n int) map[string]watch.Event {
	t.Helper()
	got := map[string]watch.Event{}
	for i := 0; i < n; i++ {
		ev := next(t, w)
		got[string(ev.Type)+" "+objectKey(t, ev)] = ev
	}
	return got
}

func objectKey(t *testing.T, ev watch.Event) string {
	switch o := ev.Object.(type) {
	case *metrics.NodeMetrics:
		return o.Name
	case *metrics.PodMetrics:
		return o.Namespace + "/" + o.Name
	case *metav1.Status:
		return o.Message
	}
	t.Fatalf("unexpected event object %T", ev.Object)
	return ""
}

func wantEvents(t *testing.T, got map[string]watch.Event, want ...string) {
	t.Helper()
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("missing event %q; got %v", k, keys(got))
		}
	}
	if len(got) != len(want) {
		t.Errorf("events %v, want %v", keys(got), want)
	}
}

func keys(m map[string]watch.Event) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func rvOf(t *testing.T, obj any) uint64 {
	t.Helper()
	a, ok := obj.(metav1.Object)
	if !ok {
		t.Fatalf("%T has no metadata", obj)
	}
	v, err := parseVersion(a.GetResourceVersion())
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", a.GetResourceVersion(), err)
	}
	return v.gen
}

// versionAt is s's resourceVersion of generation gen (s reads real storage: Latest changes nothing).
func versionAt[P any](s *metricsREST[P], gen uint64) string {
	v := strconv.FormatUint(gen, 10)
	if _, run, named := strings.Cut(s.rv(s.snaps.Latest()), "-"); named {
		v += "-" + run
	}
	return v
}

func TestWatchNodesFromNow(t *testing.T) {
	c := newCluster(t)
	c.addNode("node-a", map[string]string{"role": "control-plane"})
	c.addNode("node-b", map[string]string{"role": "worker"})
	g1 := c.cycle(map[string]float64{"node-a": 0.5, "node-b": 1}, nil)
	s := c.nodeStorage()
	w, err := s.Watch(context.Background(), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := events(t, w, 2)
	wantEvents(t, got, "ADDED node-a", "ADDED node-b")
	if rv := rvOf(t, got["ADDED node-a"].Object); rv != g1 {
		t.Errorf("ADDED at resourceVersion %d, want the collection's %d", rv, g1)
	}

	// A new collection: new samples for both nodes (node-b's usage is the same, its timestamp is not).
	g2 := c.cycle(map[string]float64{"node-a": 0.75, "node-b": 1}, nil)
	got = events(t, w, 2)
	wantEvents(t, got, "MODIFIED node-a", "MODIFIED node-b")
	m := got["MODIFIED node-a"].Object.(*metrics.NodeMetrics)
	if cpu := m.Usage[corev1.ResourceCPU]; cpu.MilliValue() != 750 || rvOf(t, m) != g2 {
		t.Errorf("MODIFIED node-a: cpu %v at resourceVersion %s, want 750m at %d", cpu.String(), m.ResourceVersion, g2)
	}

	// The node is deleted: the next collection's snapshot no longer serves it.
	_ = c.nodes.Delete(node("node-b", nil))
	c.cycle(map[string]float64{"node-a": 0.75}, nil)
	wantEvents(t, events(t, w, 2), "MODIFIED node-a", "DELETED node-b")
}

func TestWatchSelectorsAndErrors(t *testing.T) {
	c := newCluster(t)
	c.addNode("node-a", map[string]string{"role": "control-plane"})
	c.addNode("node-b", map[string]string{"role": "worker"})
	c.cycle(map[string]float64{"node-a": 0.5, "node-b": 1}, nil)
	s := c.nodeStorage()

	w, err := s.Watch(context.Background(), listOpts(t, "role=worker", ""))
	if err != nil {
		t.Fatal(err)
	}
	wantEvents(t, events(t, w, 1), "ADDED node-b")
	// node-b leaves the selection when its labels change: DELETED, as an informer on the selector expects.
	_ = c.nodes.Update(node("node-b", map[string]string{"role": "gpu"}))
	c.cycle(map[string]float64{"node-a": 0.5, "node-b": 2}, nil)
	wantEvents(t, events(t, w, 1), "DELETED node-b")
	w.Stop()

	if _, err := s.Watch(context.Background(), listOpts(t, "", "spec.unschedulable=true")); !apierrors.IsBadRequest(err) {
		t.Errorf("unsupported field selector: %v, want 400", err)
	}
	for rv, check := range map[string]func(error) bool{
		"abc": apierrors.IsBadRequest,
		"1":   apierrors.IsResourceExpired, // long before this server started
		versionAt(s, c.store.Latest().Generation()+5): apistorage.IsTooLargeResourceVersion, // not yet published
	} {
		if _, err := s.Watch(context.Background(), &metainternalversion.ListOptions{ResourceVersion: rv}); !check(err) {
			t.Errorf("resourceVersion %s: %v", rv, err)
		}
	}
}

func TestWatchResumesFromRetainedCollection(t *testing.T) {
	c := newCluster(t)
	c.addPod("ns-a", "p1")
	c.addPod("ns-a", "p2")
	c.addPod("ns-b", "p1")
	g1 := c.cycle(nil, map[string]float64{"ns-a/p1": 0.1, "ns-a/p2": 0.2, "ns-b/p1": 0.3})
	s := c.podStorage()
	s.builds.lease = 0
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
	list, err := s.List(ctx, &metainternalversion.ListOptions{})
	if err != nil || podList(t, list).ResourceVersion != versionAt(s, g1) {
		t.Fatalf("list: %v, resourceVersion %v, want %d", err, list, g1)
	}
	// While the client is away: p1 changes, p2 is deleted, p3 appears.
	_ = c.pods.Delete(podMeta("ns-a", "p2", nil))
	c.addPod("ns-a", "p3")
	c.cycle(nil, map[string]float64{"ns-a/p1": 0.15, "ns-a/p3": 0.4, "ns-b/p1": 0.35})

	w, err := s.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: versionAt(s, g1)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wantEvents(t, events(t, w, 3), "MODIFIED ns-a/p1", "DELETED ns-a/p2", "ADDED ns-a/p3")

	// Builds hold their snapshot while leased (here not at all); once storage published RetainedViews newer ones,
	// it is no longer retained.
	for i := 0; i < storage.RetainedViews; i++ {
		c.cycle(nil, map[string]float64{"ns-a/p1": 0.15})
	}
	for i := 0; i < 100 && s.builds.heldGenerations() > 0; i++ { // bounded, 2 s
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: versionAt(s, g1)}); !apierrors.IsResourceExpired(err) {
		t.Errorf("resuming from a collection no longer retained: %v, want 410 Gone", err)
	}
}

func TestWatchBookmarksUnavailableAndLimits(t *testing.T) {
	c := newCluster(t)
	c.addNode("node-a", nil)
	c.cycle(map[string]float64{"node-a": 0.5}, nil)
	s := c.nodeStorage()
	s.watches = newWatchHub(2, 0)
	w, err := s.Watch(context.Background(), &metainternalversion.ListOptions{AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	wantEvents(t, events(t, w, 1), "ADDED node-a")
	c.store.BeginCycle().Commit(storage.Outcome{Success: true}) // a collection that brought no new sample
	g := c.store.Latest().Generation()
	if ev := next(t, w); ev.Type != watch.Bookmark || rvOf(t, ev.Object) != g {
		t.Fatalf("after a collection without changes: %s, want a BOOKMARK at %d", ev.Type, g)
	}

	// The source fails for longer than --stale-after: the watch ends with the 503 a list gets.
	c.clock.Add(int64(time.Minute))
	c.store.BeginCycle().Commit(storage.Outcome{Err: context.DeadlineExceeded})
	ev := next(t, w)
	if st, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || st.Code != 503 {
		t.Fatalf("source down: %s %+v, want an ERROR event with 503", ev.Type, ev.Object)
	}
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("the watch goes on after its error event")
	}
	if _, err := s.Watch(context.Background(), &metainternalversion.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("new watch while the source is down: %v, want 503", err)
	}

	c.cycle(map[string]float64{"node-a": 0.5}, nil)
	w1, err1 := s.Watch(context.Background(), &metainternalversion.ListOptions{})
	w2, err2 := s.Watch(context.Background(), &metainternalversion.ListOptions{})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := s.Watch(context.Background(), &metainternalversion.ListOptions{}); !apierrors.IsTooManyRequests(err) {
		t.Errorf("a third watch with --max-watches=2: %v, want 429", err)
	}
	w1.Stop()
	for range w1.ResultChan() { // ends once the stopped watch's goroutine is gone and its slot is free
	}
	w3, err := s.Watch(context.Background(), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatalf("a watch after one stopped: %v", err)
	}
	_ = s.watches.shutdown()
	for _, w := range []watch.Interface{w2, w3} {
		for range w.ResultChan() { // shutdown closes every watch
		}
	}
}

// TestWatchListInitialEvents is what client-go's WatchList (sendInitialEvents=true) asks: ADDED for everything, then
// the bookmark that marks the end of the initial events.
func TestWatchListInitialEvents(t *testing.T) {
	c := newCluster(t)
	c.addNode("node-a", nil)
	g := c.cycle(map[string]float64{"node-a": 0.5}, nil)
	initial := true
	w, err := c.nodeStorage().Watch(context.Background(), &metainternalversion.ListOptions{
		SendInitialEvents: &initial, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wantEvents(t, events(t, w, 1), "ADDED node-a")
	ev := next(t, w)
	m, ok := ev.Object.(*metrics.NodeMetrics)
	if ev.Type != watch.Bookmark || !ok || m.Annotations[metav1.InitialEventsAnnotationKey] != "true" || rvOf(t, m) != g {
		t.Fatalf("after the initial events: %s %+v, want the initial-events-end BOOKMARK at %d", ev.Type, ev.Object, g)
	}
}
