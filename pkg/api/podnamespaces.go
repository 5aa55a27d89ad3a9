package api

import (
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// namespacePods holds each namespace's pods, for a namespace's lists and for the namespaces a selection of all of
// them reads. The informer's namespace index (cache.NamespaceIndex) would hold them too, as a Go map of pod keys a
// namespace; but a Go map whose keys turn over (pods replaced under new names) fills its tables with deleted slots
// until they split, and never shrinks: those maps grew once as the pods turned over (BenchmarkPodInformerTurnover;
// BENCHMARKS.md, "What settled in the first turnovers"). A podTable's size follows how many pods it holds. Guarded
// by PodIndex.mu.
type namespacePods map[string]*podTable

// put adds or replaces namespace's pod name.
func (np namespacePods) put(namespace, name string, obj runtime.Object) {
	if name == "" { // no pod: the informer keys pods by name
		return
	}
	t := np[namespace]
	if t == nil {
		t = newPodTable()
		np[namespace] = t
	}
	t.put(name, obj)
}

// remove takes namespace's pod name out, and returns the object it held, if any.
func (np namespacePods) remove(namespace, name string) (runtime.Object, bool) {
	t := np[namespace]
	if t == nil {
		return nil, false
	}
	held, ok := t.remove(name)
	if t.n == 0 {
		delete(np, namespace)
	}
	return held, ok
}

// size is how many pods namespace holds.
func (np namespacePods) size(namespace string) int {
	if t := np[namespace]; t != nil {
		return t.n
	}
	return 0
}

// namespaceLister lists one namespace's pods from PodIndex's own lists, and gets them from the informer's store.
type namespaceLister struct {
	ix        *PodIndex
	namespace string
}

// ByNamespace lists namespace's pods from the index's own lists: the informer has no namespace index.
func (ix *PodIndex) ByNamespace(namespace string) cache.GenericNamespaceLister {
	return namespaceLister{ix: ix, namespace: namespace}
}

// List copies the namespace's pods under the lock and matches them outside it.
func (l namespaceLister) List(sel labels.Selector) ([]runtime.Object, error) {
	l.ix.mu.RLock()
	var pods []runtime.Object
	if t := l.ix.byNamespace[l.namespace]; t != nil {
		pods = t.objects()
	}
	l.ix.mu.RUnlock()
	if sel == nil || sel.Empty() {
		return pods, nil
	}
	return slices.DeleteFunc(pods, func(obj runtime.Object) bool {
		m, err := meta.Accessor(obj)
		return err != nil || !sel.Matches(labels.Set(m.GetLabels()))
	}), nil
}

func (l namespaceLister) Get(name string) (runtime.Object, error) {
	obj, exists, err := l.ix.indexer.GetByKey(l.namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	return obj.(runtime.Object), nil
}
