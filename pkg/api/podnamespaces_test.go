package api

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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
	ix, err := NewPodIndex(inf)
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
		case rng.IntN(2) == 0:
			_ = inf.indexer.Delete(old)
			inf.handler.OnDelete(cache.DeletedFinalStateUnknown{Key: ns + "/" + name, Obj: old})
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
		if len(got) != len(want[ns]) {
			t.Fatalf("step %d, %s: %d pods listed, the informer holds %d", step, ns, len(got), len(want[ns]))
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

// TestNamespaceListSortedAndShrinks: a namespace's list stays sorted by name whatever the order pods come and go
// in, gives back the room of its peak once it holds a quarter of it, and is dropped once empty.
func TestNamespaceListSortedAndShrinks(t *testing.T) {
	np := namespacePods{}
	rng := rand.New(rand.NewPCG(1, 1))
	names := rng.Perm(1000)
	for _, i := range names {
		np.put("ns", fmt.Sprint(i), podMeta("ns", fmt.Sprint(i), nil))
	}
	np.put("ns", "7", podMeta("ns", "7", map[string]string{"app": "new"})) // an update: replaced where it is
	if !slices.IsSortedFunc(np["ns"], func(a, b namedPod) int { return strings.Compare(a.name, b.name) }) || len(np["ns"]) != 1000 {
		t.Fatalf("%d pods, sorted %v", len(np["ns"]), slices.IsSortedFunc(np["ns"], func(a, b namedPod) int { return strings.Compare(a.name, b.name) }))
	}
	peak := cap(np["ns"])
	for _, i := range names[:900] {
		if obj, ok := np.remove("ns", fmt.Sprint(i)); !ok || obj.(*metav1.PartialObjectMetadata).Name != fmt.Sprint(i) {
			t.Fatalf("removing pod %d: %v, %v", i, obj, ok)
		}
	}
	if c := cap(np["ns"]); len(np["ns"]) != 100 || c >= peak/2 {
		t.Errorf("after 900 of 1,000 removed: %d listed in room for %d, the peak's room %d", len(np["ns"]), c, peak)
	}
	if _, ok := np.remove("ns", "gone"); ok {
		t.Error("removed a pod never added")
	}
	for _, i := range names[900:] {
		np.remove("ns", fmt.Sprint(i))
	}
	if _, ok := np["ns"]; ok {
		t.Error("an empty namespace's list kept")
	}
}
