package api

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// TestPodIndexListsNamespaces: whatever the informer's events (pods added, updated with or without new labels,
// deleted with the watch's last state of them, which need not be the object the informer held, or as tombstones),
// each namespace's list holds exactly the informer's objects of the namespace, a pod's Get finds the informer's
// object, what a selection holds at most is never fewer than it selects, and a selection of every namespace reads
// the sets of exactly the namespaces that hold pods. Enough pods are deleted that the sets are rebuilt.
func TestPodIndexListsNamespaces(t *testing.T) {
	inf := newFakePodInformer()
	ix, err := NewPodIndex(inf, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 29))
	for step := range 5000 {
		ns, name := fmt.Sprintf("ns-%d", rng.IntN(4)), fmt.Sprintf("p%d", rng.IntN(300))
		old, exists, _ := inf.indexer.GetByKey(ns + "/" + name)
		obj := podMeta(ns, name, map[string]string{"app": fmt.Sprintf("app-%d", rng.IntN(3))})
		switch {
		case !exists:
			_ = inf.indexer.Add(obj)
			inf.handler.OnAdd(obj, false)
		case rng.IntN(3) == 0:
			_ = inf.indexer.Update(obj)
			inf.handler.OnUpdate(old, obj)
		case rng.IntN(2) == 0: // a relist's tombstone, with the object held or, when the store could not say, none
			_ = inf.indexer.Delete(old)
			tombstone := cache.DeletedFinalStateUnknown{Key: ns + "/" + name, Obj: old}
			if rng.IntN(2) == 0 {
				tombstone.Obj = nil
			}
			inf.handler.OnDelete(tombstone)
		default: // the watch's last state: another object, whose labels may have changed since
			_ = inf.indexer.Delete(old)
			inf.handler.OnDelete(obj)
		}
		if step%500 == 0 || step == 4999 {
			checkNamespaceLists(t, inf, ix, step)
		}
	}
	// A deletion the lists never saw the pod of (as after a handler's panic) changes nothing.
	inf.handler.OnDelete(podMeta("ns-0", "never", nil))
	checkNamespaceLists(t, inf, ix, -1)
}

// checkNamespaceLists compares each namespace's list with the informer's store.
func checkNamespaceLists(t *testing.T, inf *fakePodInformer, ix *PodIndex, step int) {
	t.Helper()
	want := map[string][]runtime.Object{}
	for _, obj := range inf.indexer.List() {
		o := obj.(runtime.Object)
		_, m, _ := podMetadata(o)
		want[m.GetNamespace()] = append(want[m.GetNamespace()], o)
	}
	for _, ns := range []string{"ns-0", "ns-1", "ns-2", "ns-3", "ns-none"} {
		got, err := ix.ByNamespace(ns).List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		if g, w := sortedNames(got), sortedNames(want[ns]); !slices.Equal(g, w) {
			t.Fatalf("step %d, %s: listed %v, the informer holds %v", step, ns, g, w)
		}
		for _, obj := range got {
			if !slices.Contains(want[ns], obj) {
				t.Fatalf("step %d, %s: listed %v, not the informer's object", step, ns, obj)
			}
			_, m, _ := podMetadata(obj)
			if g, err := ix.ByNamespace(ns).Get(m.GetName()); err != nil || g != obj {
				t.Fatalf("step %d: Get(%s/%s) = %v, %v, want the listed object", step, ns, m.GetName(), g, err)
			}
		}
		if n, _ := ix.upTo(ns, labels.Everything()); n != len(want[ns]) {
			t.Errorf("step %d, %s: at most %d, want %d", step, ns, n, len(want[ns]))
		}
		for _, app := range []string{"app-0", "app-1", "app-2"} {
			sel := labels.SelectorFromSet(labels.Set{"app": app})
			selected, _ := ix.ByNamespace(ns).List(sel)
			if n, _ := ix.upTo(ns, sel); n != len(selected) {
				t.Errorf("step %d, %s, app=%s: at most %d, %d selected", step, ns, app, n, len(selected))
			}
		}
	}
	if _, err := ix.ByNamespace("ns-0").Get("never"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a pod never added: %v, want NotFound", err)
	}
	namespaces, _, ok := ix.narrowing(metav1.NamespaceAll, labels.SelectorFromSet(labels.Set{"app": "app-0"}))
	slices.Sort(namespaces)
	wantNS := slices.Sorted(func(yield func(string) bool) {
		for ns := range want {
			if !yield(ns) {
				return
			}
		}
	})
	if !ok || !slices.Equal(namespaces, wantNS) {
		t.Errorf("step %d: a selection of every namespace reads %v (%v), want %v", step, namespaces, ok, wantNS)
	}
}

// TestPodTableAsAMap: whatever pods come and go, a table holds exactly what a map would, finds each, and lists each
// once; held at a constant number of pods while they turn over ten times, its length never changes (a table that
// left deleted slots would grow); emptied, it shrinks back.
func TestPodTableAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tb, want := newPodTable(), map[string]runtime.Object{}
	check := func(when string) {
		t.Helper()
		if tb.n != len(want) {
			t.Fatalf("%s: holds %d, want %d", when, tb.n, len(want))
		}
		for name, obj := range want {
			if i, ok := tb.find(name); !ok || tb.slots[i].obj != obj {
				t.Fatalf("%s: %s not found", when, name)
			}
		}
		wantObjs := slices.Collect(maps.Values(want))
		if g, w := sortedNames(tb.objects()), sortedNames(wantObjs); !slices.Equal(g, w) {
			t.Fatalf("%s: lists %d pods, want %d (or not each once)", when, len(g), len(w))
		}
	}
	made := 0
	add := func() {
		name := fmt.Sprintf("pod-%d", made)
		made++
		want[name] = podMeta("ns", name, nil)
		tb.put(name, want[name])
	}
	drop := func() {
		for name := range want { // a random one: map order
			if obj, ok := tb.remove(name); !ok || obj != want[name] {
				t.Fatalf("removing %s: %v, %v", name, obj, ok)
			}
			delete(want, name)
			return
		}
	}
	for range 3000 {
		add()
	}
	check("after 3,000 added")
	slots := len(tb.slots)
	for i := range 30000 { // ten turnovers, at 3,000 pods
		drop()
		add()
		if i%5000 == 0 {
			check(fmt.Sprintf("after %d replaced", i))
		}
		if len(tb.slots) != slots {
			t.Fatalf("after %d replaced: %d slots, %d at the start", i, len(tb.slots), slots)
		}
	}
	for range 2000 { // random replacements of a name already held keep one entry
		name := fmt.Sprintf("pod-%d", made-1-rng.IntN(3000))
		if _, ok := want[name]; ok {
			want[name] = podMeta("ns", name, map[string]string{"app": "new"})
			tb.put(name, want[name])
		}
	}
	check("after updates")
	if _, ok := tb.remove("never"); ok {
		t.Error("removed a pod never added")
	}
	tb.put("", podMeta("ns", "", nil)) // no pod has no name: neither kept nor removed
	if _, ok := tb.remove(""); ok {
		t.Error("removed a pod without a name")
	}
	for len(want) > 0 {
		drop()
	}
	check("emptied")
	if len(tb.slots) != minTableSlots {
		t.Errorf("emptied: %d slots, want %d", len(tb.slots), minTableSlots)
	}
}

// TestPodIndexBeforeNextHandler (a review's finding): storage hears of a pod's deletion from the handler after
// PodIndex, and a build that counts the removal lists the namespace after it; were the namespace's list to change
// later than storage's count, the build would list a pod deleted and not know it stale. So the next handler finds
// each change in the lists already.
func TestPodIndexBeforeNextHandler(t *testing.T) {
	inf := newFakePodInformer()
	var ix *PodIndex
	listed := func(name string) bool {
		objs, _ := ix.ByNamespace("ns").List(labels.Everything())
		return slices.ContainsFunc(objs, func(o runtime.Object) bool { return o.(*metav1.PartialObjectMetadata).Name == name })
	}
	var seen []string
	next := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen = append(seen, fmt.Sprint("add listed=", listed("p"))) },
		DeleteFunc: func(obj any) { seen = append(seen, fmt.Sprint("delete listed=", listed("p"))) },
	}
	ix, err := NewPodIndex(inf, next)
	if err != nil {
		t.Fatal(err)
	}
	inf.add(podMeta("ns", "p", nil))
	inf.delete(podMeta("ns", "p", nil))
	if want := []string{"add listed=true", "delete listed=false"}; !slices.Equal(seen, want) {
		t.Errorf("the next handler saw %v, want %v", seen, want)
	}
}

// sortedNames returns the sorted names of pods' metadata objects.
func sortedNames(objs []runtime.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		_, m, _ := podMetadata(o)
		out = append(out, m.GetName())
	}
	slices.Sort(out)
	return out
}
