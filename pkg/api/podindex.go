package api

import (
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
)

// PodLabelIndex names the pod informer's index of a namespace's pods by label: "namespace/key=value". A namespace
// never holds '/' and a label key never holds '=', so each value names one namespace, key and value.
const PodLabelIndex = "namespace/label"

// PodIndex lists a namespace's pods by label, so that a selection with an equality or `in` requirement reads only
// the pods of its smallest matching set instead of walking the namespace (DESIGN.md section 3: a build costs what
// it selects). It keeps how many pods each set holds, counted from the informer's events, so it knows which set is
// smallest, and how large a selection is at most, before listing; and each namespace's pods (namespacePods), for a
// namespace's lists. It is a PodLister itself: cmd serves it as Deps.Pods. Its lists change before the next
// handler hears of a pod (NewPodIndex): storage never counts a deletion the lists still hold.
//
// A selection of every namespace (`kubectl top pods -A -l app=web`) reads the set of each namespace that holds
// pods, which costs a lookup a namespace where walking cost a match a pod; a cluster-wide index would cost memory
// for every pod. Selections with only !=, notin, exists or !exists requirements still walk (the namespace, or every
// pod): a negative requirement narrows nothing.
type PodIndex struct {
	cache.GenericLister
	indexer cache.Indexer
	synced  cache.InformerSynced

	mu          sync.RWMutex
	byNamespace namespacePods // each namespace's pods by name
	seed        maphash.Seed
	counts      map[uint64]int // pods by the hash of an index value (setHash)
	total       int
}

// podInformer is what NewPodIndex needs of the pod informer (a cache.SharedIndexInformer).
type podInformer interface {
	AddIndexers(cache.Indexers) error
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	GetIndexer() cache.Indexer
}

// podsResource names the pods a namespace's lister does not find.
var podsResource = schema.GroupResource{Resource: "pods"}

// NewPodIndex adds the label index, its counts and the namespaces' lists to the pod informer, before it starts;
// next, if not nil, hears of each event once PodIndex has taken it in: one handler, so that what next makes of an
// event (storage counting a pod's removal, whose builds then list the namespace) never runs ahead of the lists. The
// informer needs no namespace index (cache.NamespaceIndex): PodIndex lists namespaces from its own.
func NewPodIndex(informer podInformer, next cache.ResourceEventHandler) (*PodIndex, error) {
	if err := informer.AddIndexers(cache.Indexers{PodLabelIndex: podLabelValues}); err != nil {
		return nil, fmt.Errorf("adding the pod label index: %w", err)
	}
	ix := &PodIndex{
		GenericLister: cache.NewGenericLister(informer.GetIndexer(), podsResource),
		indexer:       informer.GetIndexer(),
		byNamespace:   namespacePods{},
		seed:          maphash.MakeSeed(),
		counts:        map[uint64]int{},
	}
	reg, err := informer.AddEventHandler(podEvents{ix: ix, next: next})
	if err != nil {
		return nil, fmt.Errorf("handling the pod informer's events: %w", err)
	}
	ix.synced = reg.HasSynced
	return ix, nil
}

// HasSynced reports whether PodIndex, and the handler after it, have taken in the informer's initial list.
func (ix *PodIndex) HasSynced() bool { return ix.synced() }

// podLabelValues is the index function of PodLabelIndex.
func podLabelValues(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("indexing a pod by label: %w", err)
	}
	out := make([]string, 0, len(m.GetLabels()))
	for k, v := range m.GetLabels() {
		out = append(out, labelValue(m.GetNamespace(), k, v))
	}
	return out, nil
}

func labelValue(namespace, key, value string) string { return namespace + "/" + key + "=" + value }

// setHash keys the counts: the hash of an index value (labelValue's text, from its parts), so that each value's
// text is kept once, by the indexer, and counting makes no string. Two sets whose hashes collide (one chance in
// about 2^64 a pair) share a count: it stays at least the size of either, so upTo still bounds a selection, and
// smallest may read a larger set than it could: time, never a pod.
func (ix *PodIndex) setHash(namespace, key, value string) uint64 {
	var h maphash.Hash
	h.SetSeed(ix.seed)
	h.WriteString(namespace)
	h.WriteByte('/')
	h.WriteString(key)
	h.WriteByte('=')
	h.WriteString(value)
	return h.Sum64()
}

// narrowing returns the namespaces a selection of namespace reads the sets of (every namespace PodIndex lists pods
// of, for ""), and sel's requirements; ok is false when the index cannot narrow sel.
func (ix *PodIndex) narrowing(namespace string, sel labels.Selector) (namespaces []string, reqs labels.Requirements, ok bool) {
	if sel == nil {
		return nil, nil, false
	}
	if reqs, ok = sel.Requirements(); !ok {
		return nil, nil, false
	}
	if namespace != metav1.NamespaceAll {
		return []string{namespace}, reqs, true
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return slices.Collect(maps.Keys(ix.byNamespace)), reqs, true
}

// smallest returns which of reqs has the smallest indexed sets in namespaces (-1 when none is an equality or `in`
// within maxSetReads), and how many pods they hold: for `in`, one set a value, all disjoint (a pod has one value
// per key), as are the sets of different namespaces.
func (ix *PodIndex) smallest(namespaces []string, reqs labels.Requirements) (best, n int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	best = -1
	for i, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
		default:
			continue
		}
		values := r.ValuesUnsorted()
		if !withinSetReads(namespaces, values) {
			continue
		}
		size := 0
		for _, ns := range namespaces {
			for _, v := range values {
				size += ix.counts[ix.setHash(ns, r.Key(), v)]
			}
		}
		if best < 0 || size < n {
			best, n = i, size
		}
	}
	return best, n
}

// selectIn lists the pods of namespace ("" for all) that sel selects from its smallest indexed sets; ok is false
// when the index cannot narrow sel, and the caller walks. The counts choose the requirement and size the slice: its
// sets are read whatever they say, so counts that lag the informer's cache by a few events cost time, never a pod.
func (ix *PodIndex) selectIn(namespace string, sel labels.Selector) (objs []any, ok bool, err error) {
	namespaces, reqs, ok := ix.narrowing(namespace, sel)
	if !ok {
		return nil, false, nil
	}
	best, n := ix.smallest(namespaces, reqs)
	if best < 0 {
		return nil, false, nil
	}
	objs = make([]any, 0, n) // the sets read: about the pods an HPA's selection (its workload's labels) selects
	r := reqs[best]
	values := r.ValuesUnsorted()
	for _, ns := range namespaces {
		for _, v := range values {
			set, err := ix.indexer.ByIndex(PodLabelIndex, labelValue(ns, r.Key(), v))
			if err != nil {
				return nil, true, fmt.Errorf("reading the pod label index: %w", err)
			}
			for _, obj := range set {
				if m, err := meta.Accessor(obj); err == nil && sel.Matches(labels.Set(m.GetLabels())) {
					objs = append(objs, obj)
				}
			}
		}
	}
	return objs, true, nil
}

// upTo returns at most how many pods sel selects in namespace ("" for all): its smallest indexed sets, else its
// namespace, else every pod; known is false until the counts have seen the informer's initial list.
func (ix *PodIndex) upTo(namespace string, sel labels.Selector) (n int, known bool) {
	if ix.synced == nil || !ix.synced() {
		return 0, false
	}
	best := -1
	if namespaces, reqs, ok := ix.narrowing(namespace, sel); ok {
		best, n = ix.smallest(namespaces, reqs)
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	bound := ix.total
	if namespace != metav1.NamespaceAll {
		bound = ix.byNamespace.size(namespace)
	}
	if best < 0 || bound < n {
		n = bound
	}
	return n, true
}

var _ PodLister = (*PodIndex)(nil)
