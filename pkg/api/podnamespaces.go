package api

import (
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// namespacePods holds each namespace's pods, for a namespace's lists and for the namespaces a selection of all of
// them reads. The informer's namespace index (cache.NamespaceIndex) would hold them too, as a hash set of pod keys
// a namespace; but a Go map whose keys turn over (pods replaced under new names) fills its tables with deleted
// slots until it grows, and never shrinks: those sets grew by 41 B a pod over two turnovers of 30,000 pods, once
// (BenchmarkPodIndexTurnover). A slice sorted by name holds what it lists: no slot is left behind, a pod is found
// by a binary search, and adding or removing one moves the pods after it. Guarded by PodIndex.mu.
type namespacePods map[string][]namedPod

// namedPod is a pod the informer holds, by its name.
type namedPod struct {
	name string
	obj  runtime.Object
}

// put adds or replaces namespace's pod name.
func (np namespacePods) put(namespace, name string, obj runtime.Object) {
	pods := np[namespace]
	i, found := slices.BinarySearchFunc(pods, name, byName)
	if found {
		pods[i].obj = obj
		return
	}
	np[namespace] = slices.Insert(pods, i, namedPod{name: name, obj: obj})
}

// remove takes namespace's pod name out, and returns the object it held, if any.
func (np namespacePods) remove(namespace, name string) (runtime.Object, bool) {
	pods := np[namespace]
	i, found := slices.BinarySearchFunc(pods, name, byName)
	if !found {
		return nil, false
	}
	held := pods[i].obj
	pods = slices.Delete(pods, i, i+1)
	switch {
	case len(pods) == 0:
		delete(np, namespace)
	case cap(pods) > minClipped && len(pods) < cap(pods)/4: // the namespace shrank: give back its peak's room
		np[namespace] = slices.Clip(slices.Clone(pods))
	default:
		np[namespace] = pods
	}
	return held, true
}

// minClipped is the least room a namespace's slice gives back.
const minClipped = 64

func byName(p namedPod, name string) int { return strings.Compare(p.name, name) }

// size is how many pods namespace holds.
func (np namespacePods) size(namespace string) int { return len(np[namespace]) }

// namespaceLister lists one namespace's pods from PodIndex's own lists, and gets them from the informer's store.
type namespaceLister struct {
	ix        *PodIndex
	namespace string
}

// ByNamespace lists namespace's pods from the index's own lists: the informer has no namespace index.
func (ix *PodIndex) ByNamespace(namespace string) cache.GenericNamespaceLister {
	return namespaceLister{ix: ix, namespace: namespace}
}

func (l namespaceLister) List(sel labels.Selector) ([]runtime.Object, error) {
	l.ix.mu.RLock()
	defer l.ix.mu.RUnlock()
	pods := l.ix.namespaces[l.namespace]
	out := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		if sel == nil || sel.Empty() {
			out = append(out, p.obj)
		} else if m, err := meta.Accessor(p.obj); err == nil && sel.Matches(labels.Set(m.GetLabels())) {
			out = append(out, p.obj)
		}
	}
	return out, nil
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
