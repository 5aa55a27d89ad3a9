package api

import (
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// fakeMetrics is Snapshots with fixed answers. Every Latest is a new generation (the previous one's Changed
// closed), as if a collection landed between any two requests: nothing is shared between requests.
type fakeMetrics struct {
	nodes  map[string]storage.NodePoint
	pods   map[string]storage.PodPoint // key "ns/name"
	err    error
	health storage.Health

	mu  sync.Mutex
	cur *fakeSnapshot
}

// fakeSnapshot is one generation of a fakeMetrics.
type fakeSnapshot struct {
	*fakeMetrics
	gen     uint64
	changed chan struct{}
}

func (f *fakeMetrics) Latest() storage.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := &fakeSnapshot{fakeMetrics: f, gen: 1, changed: make(chan struct{})}
	if f.cur != nil {
		next.gen = f.cur.gen + 1
		close(f.cur.changed)
	}
	f.cur = next
	return next
}

// Committed is the current generation (a fake has no interim publications), or a first one.
func (f *fakeMetrics) Committed() storage.Snapshot {
	f.mu.Lock()
	cur := f.cur
	f.mu.Unlock()
	if cur == nil {
		return f.Latest()
	}
	return cur
}

// Removals is 0: a fake's objects are never removed.
func (f *fakeMetrics) Removals() uint64 { return 0 }

// RemovedAfter names nothing: a fake's objects are never removed.
func (f *fakeMetrics) RemovedAfter(count uint64) ([]storage.Removal, uint64, bool) {
	return nil, count, true
}

// Hold holds nothing: a fake keeps only its current generation.
func (f *fakeMetrics) Hold(storage.Snapshot) (*storage.Handle, bool) { return nil, true }

// Resolve finds the current generation only.
func (f *fakeMetrics) Resolve(gen uint64) (storage.Snapshot, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil || f.cur.gen != gen {
		return nil, false
	}
	return f.cur, true
}

func (f *fakeSnapshot) Node(name string) (storage.NodePoint, bool) {
	p, ok := f.nodes[name]
	return p, ok
}
func (f *fakeSnapshot) Pod(ns, name string) (storage.PodPoint, bool) {
	p, ok := f.pods[ns+"/"+name]
	return p, ok
}
func (f *fakeSnapshot) Generation() uint64       { return f.gen }
func (f *fakeSnapshot) Changed() <-chan struct{} { return f.changed }

// Retained is whether f is the current generation: a fake keeps no other.
func (f *fakeSnapshot) Retained() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur == f
}
func (f *fakeSnapshot) Unavailable() error     { return f.err }
func (f *fakeSnapshot) Health() storage.Health { return f.health }
func (f *fakeSnapshot) Each(node func(string), pod func(string, string)) {
	for name := range f.nodes {
		if node != nil {
			node(name)
		}
	}
	for key := range f.pods {
		if ns, name, ok := strings.Cut(key, "/"); ok && pod != nil {
			pod(ns, name)
		}
	}
}

// nodeRESTOf serves the nodes of lister that have metrics in m, with readers of their own and the default limits.
func nodeRESTOf(m Snapshots, lister NodeLister, nodeSelector labels.Requirements) *nodeREST {
	return newNodeStorage(m, lister, nodeSelector, newReaders(Deps{}))
}

// podRESTOf serves the Running pods of lister that have metrics in m, with readers of their own and the default
// limits.
func podRESTOf(m Snapshots, lister PodLister) *podREST {
	return newPodStorage(m, lister, newReaders(Deps{}))
}

// unshared is the plain list in a list that a build keeps for sharing (sharedNodeList, sharedPodList; a leanList's
// made anew), and any other object as it is.
func unshared(obj runtime.Object) runtime.Object {
	switch l := obj.(type) {
	case *sharedNodeList:
		return l.NodeMetricsList
	case *sharedPodList:
		return l.PodMetricsList
	case leanObject:
		return l.(runtime.CacheableObject).GetObject()
	}
	return obj
}

var sampleTime = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func nodePoint(cpuNano, mem uint64) storage.NodePoint {
	return storage.NodePoint{Timestamp: sampleTime, Window: 15 * time.Second, Usage: storage.Usage{CPU: cpuNano, Memory: mem}}
}

func podPoint(containers ...storage.ContainerPoint) storage.PodPoint {
	p := storage.PodPoint{Timestamp: sampleTime, Window: 15 * time.Second}
	for _, c := range containers {
		p.Names, p.Usages = append(p.Names, c.Name), append(p.Usages, c.Usage)
	}
	return p
}

func node(name string, lbls map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

func podMeta(ns, name string, lbls map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
	}
}

func nodeLister(nodes ...*corev1.Node) corelisters.NodeLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		_ = idx.Add(n)
	}
	return corelisters.NewNodeLister(idx)
}

func podLister(pods ...*metav1.PartialObjectMetadata) cache.GenericLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		_ = idx.Add(p)
	}
	return cache.NewGenericLister(idx, schema.GroupResource{Resource: "pods"})
}

// fixture: three nodes (node-c has no metrics) and pods in two namespaces (ns-a/p3 has no metrics).
func fixture() (*fakeMetrics, corelisters.NodeLister, cache.GenericLister) {
	m := &fakeMetrics{
		nodes: map[string]storage.NodePoint{
			"node-b": nodePoint(250_000_000, 3<<30),
			"node-a": nodePoint(1_234_567, 512<<20),
		},
		pods: map[string]storage.PodPoint{
			"ns-b/p1": podPoint(storage.ContainerPoint{Name: "app", Usage: storage.Usage{CPU: 100_000_000, Memory: 10 << 20}}),
			"ns-a/p2": podPoint(
				storage.ContainerPoint{Name: "app", Usage: storage.Usage{CPU: 100_000_001, Memory: 20 << 20}},
				storage.ContainerPoint{Name: "sidecar", Usage: storage.Usage{CPU: 50_000_000, Memory: 5 << 20}}),
			"ns-a/p1": podPoint(storage.ContainerPoint{Name: "app", Usage: storage.Usage{CPU: 1, Memory: 1}}),
		},
	}
	nodes := nodeLister(
		node("node-c", map[string]string{"role": "worker"}),
		node("node-b", map[string]string{"role": "worker"}),
		node("node-a", map[string]string{"role": "control-plane"}),
	)
	pods := podLister(
		podMeta("ns-b", "p1", map[string]string{"app": "web"}),
		podMeta("ns-a", "p2", map[string]string{"app": "web"}),
		podMeta("ns-a", "p1", map[string]string{"app": "db"}),
		podMeta("ns-a", "p3", map[string]string{"app": "web"}),
	)
	return m, nodes, pods
}

func storageUsage(cpu, mem uint64) storage.Usage { return storage.Usage{CPU: cpu, Memory: mem} }
