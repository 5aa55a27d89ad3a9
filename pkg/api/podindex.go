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
	"k8s.io/apimachinery/pkg/runtime"
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
// smallest, and how large a selection is at most, before listing; and each namespace's pods, sorted by name
// (namespacePods), for a namespace's lists. It is a PodLister itself: cmd serves it as Deps.Pods.
//
// A selection of every namespace (`kubectl top pods -A -l app=web`) reads the set of each namespace that holds pods, which costs a lookup a namespace where walking cost a match a pod; a cluster-wide index would cost memory
// for every pod. Selections with only !=, notin, exists or !exists requirements still walk (the namespace, or every
// pod): a negative requirement narrows nothing.
type PodIndex struct {
	cache.GenericLister
	indexer cache.Indexer
	synced  cache.InformerSynced

	mu         sync.RWMutex
	namespaces namespacePods // each namespace's pods
	seed       maphash.Seed
	counts     map[uint64]int // pods by the hash of an index value (setHash)
	total      int
}

// podInformer is what NewPodIndex needs of the pod informer (a cache.SharedIndexInformer).
type podInformer interface {
	AddIndexers(cache.Indexers) error
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	GetIndexer() cache.Indexer
}

// podsResource names the pods a namespace's lister does not find.
var podsResource = schema.GroupResource{Resource: "pods"}

// NewPodIndex adds the label index, its counts and the namespaces' lists to the pod informer, before it starts. The
// informer needs no namespace index (cache.NamespaceIndex): PodIndex lists namespaces from its own.
func NewPodIndex(informer podInformer) (*PodIndex, error) {
	if err := informer.AddIndexers(cache.Indexers{PodLabelIndex: podLabelValues}); err != nil {
		return nil, fmt.Errorf("adding the pod label index: %w", err)
	}
	ix := &PodIndex{
		GenericLister: cache.NewGenericLister(informer.GetIndexer(), podsResource),
		indexer:       informer.GetIndexer(),
		namespaces:    namespacePods{},
		seed:          maphash.MakeSeed(),
		counts:        map[uint64]int{},
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    ix.added,
		UpdateFunc: ix.update,
		DeleteFunc: ix.deleted,
	})
	if err != nil {
		return nil, fmt.Errorf("counting the pod label index: %w", err)
	}
	ix.synced = reg.HasSynced
	return ix, nil
}

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

// added is the informer's add handler: obj joins its namespace's list and the counts.
func (ix *PodIndex) added(obj any) {
	if o, m, ok := podMetadata(obj); ok {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		ix.namespaces.put(m.GetNamespace(), m.GetName(), o)
		ix.count(m, 1)
	}
}

// deleted is the informer's delete handler: obj, or a tombstone's, leaves its namespace's list and the counts. The
// object deleted is the watch's last state of the pod, not the one the informer held: pods are found by name.
func (ix *PodIndex) deleted(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if _, m, ok := podMetadata(obj); ok {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		if held, ok := ix.namespaces.remove(m.GetNamespace(), m.GetName()); ok {
			_, m, _ := podMetadata(held)
			ix.count(m, -1) // the labels counted: the object held, not the watch's last state of it
		}
	}
}

// update is the informer's update handler: the new object takes the old one's place (a namespace's list holds the
// informer's objects), and the counts follow its labels.
func (ix *PodIndex) update(oldObj, newObj any) {
	_, o, ok1 := podMetadata(oldObj)
	obj, n, ok2 := podMetadata(newObj)
	if !ok1 || !ok2 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if o.GetNamespace() != n.GetNamespace() || o.GetName() != n.GetName() { // never: they make the informer's key
		ix.namespaces.remove(o.GetNamespace(), o.GetName())
	}
	ix.namespaces.put(n.GetNamespace(), n.GetName(), obj)
	if !maps.Equal(o.GetLabels(), n.GetLabels()) { // most updates: the counts stay
		ix.count(o, -1)
		ix.count(n, 1)
	}
}

// podMetadata returns obj as the object a namespace's list holds and its metadata; ok is false when it has none
// (the indexer refused it too: it is in no set).
func podMetadata(obj any) (runtime.Object, metav1.Object, bool) {
	o, ok := obj.(runtime.Object)
	if !ok {
		return nil, nil, false
	}
	m, err := meta.Accessor(o)
	return o, m, err == nil
}

// count adds d to the counts of m's labels; ix.mu is held.
func (ix *PodIndex) count(m metav1.Object, d int) {
	ix.total += d
	for k, v := range m.GetLabels() {
		ix.add(ix.setHash(m.GetNamespace(), k, v), d)
	}
}

func (ix *PodIndex) add(set uint64, d int) {
	if n := ix.counts[set] + d; n > 0 {
		ix.counts[set] = n
	} else {
		delete(ix.counts, set)
	}
}

// narrowing returns the namespaces a selection of namespace reads the sets of (every namespace the informer holds,
// for ""), and sel's requirements; ok is false when the index cannot narrow sel.
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
	return slices.Collect(maps.Keys(ix.namespaces)), reqs, true
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
		bound = ix.namespaces.size(namespace)
	}
	if best < 0 || bound < n {
		n = bound
	}
	return n, true
}

var _ PodLister = (*PodIndex)(nil)
