package api

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// podEvents is PodIndex's handler of the pod informer's events: it takes each in, then hands it to next.
type podEvents struct {
	ix   *PodIndex
	next cache.ResourceEventHandler
}

func (h podEvents) OnAdd(obj any, isInInitialList bool) {
	h.ix.added(obj)
	if h.next != nil {
		h.next.OnAdd(obj, isInInitialList)
	}
}

func (h podEvents) OnUpdate(oldObj, newObj any) {
	h.ix.updated(oldObj, newObj)
	if h.next != nil {
		h.next.OnUpdate(oldObj, newObj)
	}
}

func (h podEvents) OnDelete(obj any) {
	h.ix.deleted(obj)
	if h.next != nil {
		h.next.OnDelete(obj)
	}
}

// added takes in a pod: it joins its namespace's list and the counts.
func (ix *PodIndex) added(obj any) {
	if o, m, ok := podMetadata(obj); ok {
		ix.mu.Lock()
		defer ix.mu.Unlock()
		ix.byNamespace.put(m.GetNamespace(), m.GetName(), o)
		ix.count(m, 1)
	}
}

// deleted takes a pod out of its namespace's list and the counts. The object is the watch's last state of the pod,
// not the one the informer held, or a tombstone of a relist, which may hold no object: the pod is found by name,
// and the labels uncounted are those of the object held.
func (ix *PodIndex) deleted(obj any) {
	namespace, name, ok := DeletedPod(obj)
	if !ok {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if held, ok := ix.byNamespace.remove(namespace, name); ok {
		if _, m, ok := podMetadata(held); ok {
			ix.count(m, -1)
		}
	}
}

// DeletedPod returns the namespace and name of the pod a pod informer's delete handler was given: its object, else
// a tombstone's object, else the tombstone's key (a relist's tombstone may hold no object).
func DeletedPod(obj any) (namespace, name string, ok bool) {
	tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
	if isTombstone {
		obj = tombstone.Obj
	}
	if _, m, ok := podMetadata(obj); ok && m.GetName() != "" {
		return m.GetNamespace(), m.GetName(), true
	}
	if isTombstone {
		if namespace, name, err := cache.SplitMetaNamespaceKey(tombstone.Key); err == nil && name != "" {
			return namespace, name, true
		}
	}
	return "", "", false
}

// updated takes in a pod's new object: it replaces the old one in its namespace's list (which holds the informer's
// objects), and the counts follow its labels.
func (ix *PodIndex) updated(oldObj, newObj any) {
	_, o, ok1 := podMetadata(oldObj)
	obj, n, ok2 := podMetadata(newObj)
	if !ok1 || !ok2 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if o.GetNamespace() != n.GetNamespace() || o.GetName() != n.GetName() { // never: they make the informer's key
		ix.byNamespace.remove(o.GetNamespace(), o.GetName())
	}
	ix.byNamespace.put(n.GetNamespace(), n.GetName(), obj)
	if !maps.Equal(o.GetLabels(), n.GetLabels()) { // most updates keep the labels, and the counts
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
		ix.addCount(ix.setHash(m.GetNamespace(), k, v), d)
	}
}

func (ix *PodIndex) addCount(set uint64, d int) {
	if n := ix.counts[set] + d; n > 0 {
		ix.counts[set] = n
	} else {
		delete(ix.counts, set)
	}
}
