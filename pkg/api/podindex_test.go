package api

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// fakePodInformer is the pod informer as NewPodIndex sees it: its indexer, and its one event handler called as the
// informer calls it, after the indexer changed.
type fakePodInformer struct {
	indexer cache.Indexer
	handler cache.ResourceEventHandler
	synced  bool
}

// newFakePodInformer is a pod informer without a namespace index, as cmd's.
func newFakePodInformer() *fakePodInformer {
	return &fakePodInformer{indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), synced: true}
}

func (f *fakePodInformer) AddIndexers(i cache.Indexers) error { return f.indexer.AddIndexers(i) }
func (f *fakePodInformer) GetIndexer() cache.Indexer          { return f.indexer }
func (f *fakePodInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.handler = h
	return fakeRegistration{f}, nil
}

type fakeRegistration struct{ f *fakePodInformer }

func (r fakeRegistration) HasSynced() bool                     { return r.f.synced }
func (r fakeRegistration) HasSyncedChecker() cache.DoneChecker { return nil }
func (f *fakePodInformer) add(p runtime.Object) {
	_ = f.indexer.Add(p)
	f.handler.OnAdd(p, false)
}
func (f *fakePodInformer) delete(p runtime.Object) {
	old, _, _ := f.indexer.Get(p)
	_ = f.indexer.Delete(p)
	f.handler.OnDelete(old)
}
func (f *fakePodInformer) update(p runtime.Object) {
	old, _, _ := f.indexer.Get(p)
	_ = f.indexer.Update(p)
	f.handler.OnUpdate(old, p)
}

// newIndexedPods is a pod informer with the label index and n pods in ns-a, labeled by labelsOf(i).
func newIndexedPods(t testing.TB, n int, labelsOf func(i int) map[string]string) (*fakePodInformer, *PodIndex) {
	t.Helper()
	inf := newFakePodInformer()
	ix, err := NewPodIndex(inf, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		inf.add(podMeta("ns-a", fmt.Sprintf("p%04d", i), labelsOf(i)))
	}
	return inf, ix
}

func keysOf(t *testing.T, k podKind, namespace string, sel labels.Selector) []string {
	t.Helper()
	objs, err := k.objects(namespace, sel)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(objs))
	for i := range objs {
		keys[i] = objs[i].key()
	}
	slices.Sort(keys)
	return keys
}

// TestPodIndexSelectsAsTheWalk: for every shape of label selection, in a namespace and in all, the label index
// selects exactly the pods that walking them selects, also after pods are relabeled, moved between values and
// deleted; and a selection with an equality or `in` requirement reads only its smallest sets, in a namespace and
// in every namespace (where it walked every pod before).
func TestPodIndexSelectsAsTheWalk(t *testing.T) {
	labelsOf := func(i int) map[string]string {
		l := map[string]string{"app": []string{"web", "db", "cache"}[i%3], "tier": []string{"front", "back"}[i%2]}
		switch {
		case i%7 == 0:
			return nil
		case i%5 == 0:
			l["app.kubernetes.io/name"] = "ring"
		case i%11 == 0:
			l["app"] = "" // an empty value is a value
		}
		return l
	}
	inf, ix := newIndexedPods(t, 200, labelsOf)
	for i := 0; i < 50; i++ {
		inf.add(podMeta("ns-b", fmt.Sprintf("p%04d", i), labelsOf(i+1)))
	}
	inf.update(podMeta("ns-a", "p0001", map[string]string{"app": "db", "tier": "back"})) // was web, back
	inf.update(podMeta("ns-a", "p0004", map[string]string{"app": "new"}))
	inf.delete(podMeta("ns-a", "p0002", nil))
	indexed, walked := podKind{pods: ix}, podKind{pods: cache.NewGenericLister(inf.indexer, podResource)}
	tests := []struct {
		selector string
		narrows  bool // the index reads its smallest sets
	}{
		{"", false},
		{"app=web", true},
		{"app==web", true},
		{"app in (web,db)", true},
		{"app=web,tier=front", true},
		{"tier=front,app=web", true},
		{"app=web,tier!=front", true},
		{"app in (web),tier in (back,front)", true},
		{"app=", true},
		{"app=new", true},
		{"app=none", true},
		{"app=web,zone=a", true},
		{"app.kubernetes.io/name=ring", true},
		{"app.kubernetes.io/name=ring,app notin (db)", true},
		{"app=web,tier", true},
		{"app=web,!zone", true},
		{"app!=web", false},
		{"app notin (web,db)", false},
		{"app", false},
		{"!app", false},
		{"app,tier!=back", false},
	}
	for _, tt := range tests {
		sel, err := labels.Parse(tt.selector)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range []string{"ns-a", "ns-b", "ns-c", metav1.NamespaceAll} {
			got, want := keysOf(t, indexed, ns, sel), keysOf(t, walked, ns, sel)
			if !slices.Equal(got, want) {
				t.Errorf("%q in %q: the index selects %d pods %v, the walk %d %v", tt.selector, ns, len(got), got, len(want), want)
			}
			_, narrowed, _ := ix.selectIn(ns, sel)
			if narrowed != tt.narrows {
				t.Errorf("%q in %q: read from the index %v, want %v", tt.selector, ns, narrowed, tt.narrows)
			}
			if n, known := ix.upTo(ns, sel); !known || n < len(want) {
				t.Errorf("%q in %q: at most %d (known %v), but %d selected", tt.selector, ns, n, known, len(want))
			}
		}
	}
}

// TestPodIndexSizes: what upTo says a selection holds at most, before listing: its smallest indexed set, its
// namespace, or every pod; unknown until the counts have seen the informer's initial list.
func TestPodIndexSizes(t *testing.T) {
	inf, ix := newIndexedPods(t, 600, func(i int) map[string]string {
		return map[string]string{"app": fmt.Sprintf("app-%d", i%40), "tier": []string{"front", "back"}[i%2]}
	})
	inf.add(podMeta("ns-b", "p", map[string]string{"app": "app-0"}))
	inf.delete(podMeta("ns-a", "p0000", nil))
	tests := []struct {
		namespace, selector string
		want                int
	}{
		{"ns-a", "app=app-1", 15},
		{"ns-a", "app=app-0", 14},
		{"ns-a", "app in (app-1,app-2)", 30},
		{"ns-a", "tier=front,app=app-1", 15},
		{"ns-a", "tier=front", 299},
		{"ns-a", "app!=app-1", 599},
		{"ns-a", "app=none", 0},
		{"ns-b", "", 1},
		{"ns-c", "app=app-1", 0},
		{"", "app=app-1", 15},
		{"", "app=app-0", 15},
		{"", "app in (app-1,app-2)", 30},
		{"", "tier=front,app=app-0", 15},
		{"", "app!=app-1", 600},
		{"", "", 600},
	}
	for _, tt := range tests {
		if n, known := ix.upTo(tt.namespace, labels.SelectorFromSet(nil)); !known || n < 0 {
			t.Fatalf("upTo(%q): %d, known %v", tt.namespace, n, known)
		}
		sel, err := labels.Parse(tt.selector)
		if err != nil {
			t.Fatal(err)
		}
		if n, known := ix.upTo(tt.namespace, sel); !known || n != tt.want {
			t.Errorf("%q in %q: at most %d (known %v), want %d", tt.selector, tt.namespace, n, known, tt.want)
		}
	}
	inf.synced = false
	if _, known := ix.upTo("ns-a", labels.Everything()); known {
		t.Error("a size known before the counts have seen the informer's initial list")
	}
}

// TestPodIndexCountsKeepNoText (a review's finding): the counts were keyed by each label value's text, a copy of
// the indexer's own key made at each event (namespace/key=value, kept twice, made three times an event). Counting a
// pod's labels makes no string now, so the counts keep none: the indexer's key is the text's one copy
// (BENCHMARKS.md, the label index: what 30,000 pods keep).
func TestPodIndexCountsKeepNoText(t *testing.T) {
	labelsOf := func(i int) map[string]string {
		return map[string]string{"app": fmt.Sprintf("app-%d", i%40), "pod-template-hash": "5d8c7b9f", "tier": "backend"}
	}
	_, ix := newIndexedPods(t, 600, labelsOf)
	pod := podMeta("ns-a", "p0007", labelsOf(7))
	if n := testing.AllocsPerRun(100, func() {
		ix.count(pod, 1) // as an informer's event, of a pod whose sets exist
		ix.count(pod, -1)
	}); n != 0 {
		t.Errorf("counting a pod of 3 labels in and out made %v allocations, want 0", n)
	}
	if n, _ := ix.upTo("ns-a", labels.SelectorFromSet(labels.Set{"app": "app-7"})); n != 15 {
		t.Errorf("app=app-7: at most %d, want 15", n)
	}
}
