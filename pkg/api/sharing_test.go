package api

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// hookedPods is pod storage on real storage with n pods in ns-a, whose kind counts its builds.
func hookedPods(t *testing.T, n int) (*cluster, *hookedKind[storage.PodPoint], *podREST, map[string]float64) {
	c := newCluster(t)
	cpu := map[string]float64{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("p%03d", i)
		c.addPod("ns-a", name)
		cpu["ns-a/"+name] = 0.1
	}
	c.cycle(nil, cpu)
	k := &hookedKind[storage.PodPoint]{kind: podKind{pods: cache.NewGenericLister(c.pods, podResource)}}
	return c, k, newMetricsREST[storage.PodPoint](c.store, k, newReaders(Deps{})), cpu
}

// TestReadersShareOneBuild: concurrent lists, pages and watches of one selection on one snapshot cause exactly one
// build; a page builds only its own items; the watchers' initial events are the same objects.
func TestReadersShareOneBuild(t *testing.T) {
	_, k, s, _ := hookedPods(t, 30)
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var watches []watch.Interface
	for i := 0; i < 10; i++ {
		wg.Add(3)
		go func() { // a list
			defer wg.Done()
			if obj, err := s.List(ctx, &metainternalversion.ListOptions{}); err != nil || len(podList(t, obj).Items) != 30 {
				t.Errorf("list: %v", err)
			}
		}()
		go func() { // paging through everything, 7 at a time
			defer wg.Done()
			opts, seen := &metainternalversion.ListOptions{Limit: 7}, 0
			for {
				obj, err := s.List(ctx, opts)
				if err != nil {
					t.Errorf("page: %v", err)
					return
				}
				l := podList(t, obj)
				if seen += len(l.Items); l.Continue == "" {
					break
				}
				opts = &metainternalversion.ListOptions{Limit: 7, Continue: l.Continue}
			}
			if seen != 30 {
				t.Errorf("paged through %d pods, want 30", seen)
			}
		}()
		go func() { // a watch
			defer wg.Done()
			w, err := s.Watch(ctx, &metainternalversion.ListOptions{})
			if err != nil {
				t.Errorf("watch: %v", err)
				return
			}
			mu.Lock()
			watches = append(watches, w)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if n := k.builds.Load(); n != 1 {
		t.Errorf("10 lists, 10 paginations and 10 watches of one selection and snapshot made %d builds, want 1", n)
	}
	var first []runtime.Object
	for i, w := range watches {
		for j := 0; j < 30; j++ {
			ev := <-w.ResultChan()
			if i == 0 {
				first = append(first, ev.Object)
			} else if ev.Type != watch.Added || ev.Object != first[j] {
				t.Fatalf("watcher %d, event %d: %s %p, want ADDED of the same object as watcher 0's (%p)", i, j, ev.Type, ev.Object, first[j])
			}
		}
		w.Stop()
	}

	before := k.items.Load()
	obj, err := s.List(ctx, &metainternalversion.ListOptions{Limit: 1, ResourceVersion: "0"})
	if err != nil || len(podList(t, obj).Items) != 1 {
		t.Fatalf("limit=1: %v", err)
	}
	if n := k.items.Load() - before; n != 1 {
		t.Errorf("a page of limit=1 built %d items, want 1", n)
	}
}

// TestWatchersShareEvents: watchers of one selection receive the same events for a collection, each encoded once for
// all of them; a watcher of another selection gets its own.
func TestWatchersShareEvents(t *testing.T) {
	c, _, s, cpu := hookedPods(t, 5)
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
	var ws []watch.Interface
	for i := 0; i < 5; i++ {
		w, err := s.Watch(ctx, &metainternalversion.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		events(t, w, 5)
		ws = append(ws, w)
	}
	other, err := s.Watch(ctx, listOpts(t, "", "metadata.name=p001"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	events(t, other, 1)

	cpu["ns-a/p001"] = 0.5
	c.cycle(nil, cpu)
	var encodes atomic.Int32
	encode := func(obj runtime.Object, w io.Writer) error {
		encodes.Add(1)
		_, err := fmt.Fprintf(w, "%s", obj.(*metrics.PodMetrics).Name)
		return err
	}
	var objs []runtime.Object
	for i, w := range ws {
		for j := 0; j < 5; j++ {
			ev := <-w.ResultChan()
			co, ok := ev.Object.(runtime.CacheableObject)
			if ev.Type != watch.Modified || !ok {
				t.Fatalf("watcher %d: %s %T, want MODIFIED of a shared object", i, ev.Type, ev.Object)
			}
			if err := co.CacheEncode("test", encode, io.Discard); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				objs = append(objs, ev.Object)
			} else if objs[j] != ev.Object {
				t.Errorf("watcher %d, event %d: another object than watcher 0's", i, j)
			}
		}
	}
	if n := encodes.Load(); n != 5 {
		t.Errorf("5 watchers of 5 events encoded %d times, want 5", n)
	}
	if ev := next(t, other); ev.Type != watch.Modified || objectKey(t, ev) != "ns-a/p001" {
		t.Errorf("the other selection's watcher: %s %s, want MODIFIED ns-a/p001", ev.Type, objectKey(t, ev))
	}
}

// TestBuildsBounded: with every build slot busy, a request that needs a build waits, then gets 429 with
// Retry-After; a list already built is still served.
func TestBuildsBounded(t *testing.T) {
	_, k, s, _ := hookedPods(t, 3)
	s.limit = newBuildLimit(1)
	expired := make(chan time.Time)
	close(expired)
	s.limit.after = func(time.Duration) <-chan time.Time { return expired }
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
	if _, err := s.List(ctx, &metainternalversion.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	release, err := s.limit.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := s.List(ctx, &metainternalversion.ListOptions{}); err != nil {
		t.Errorf("a list built before the slots filled: %v", err)
	}
	builds := k.builds.Load()
	_, err = s.List(ctx, listOpts(t, "app=web", ""))
	st, ok := err.(apierrors.APIStatus)
	if !apierrors.IsTooManyRequests(err) || !ok || st.Status().Details == nil || st.Status().Details.RetryAfterSeconds != 1 {
		t.Fatalf("a new selection while every slot is busy: %v, want 429 with Retry-After 1", err)
	}
	if _, err := s.Watch(ctx, listOpts(t, "app=db", "")); !apierrors.IsTooManyRequests(err) {
		t.Errorf("a watch of a new selection while every slot is busy: %v, want 429", err)
	}
	if k.builds.Load() != builds {
		t.Error("a refused request built its selection")
	}
}

// TestLastListReleased: the build behind a list of every pod is let go once a newer snapshot is published and its
// lease has run out, though no later list comes to sweep it (it held about 34 MB at 10,000 nodes until the next
// list).
func TestLastListReleased(t *testing.T) {
	c, _, s, cpu := hookedPods(t, 30)
	s.builds.lease = 0
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
	if _, err := s.List(ctx, &metainternalversion.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	builds := func() int {
		s.builds.mu.Lock()
		defer s.builds.mu.Unlock()
		return len(s.builds.gens)
	}
	time.Sleep(50 * time.Millisecond) // what a sweep would drop, it would have by now
	if builds() != 1 {
		t.Fatalf("%d generations of builds after one list, want 1 while its snapshot is the newest", builds())
	}
	c.cycle(nil, cpu)
	for i := 0; i < 100 && builds() != 0; i++ { // bounded: 2 s
		time.Sleep(20 * time.Millisecond)
	}
	if n := builds(); n != 0 {
		t.Errorf("%d generations of builds kept after a newer snapshot and the lease, want none", n)
	}
}
