package api

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/component-base/metrics/testutil"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestWatchLimitsBeforeAnyWork: --max-watches and --max-watches-per-user refuse a watch before anything is built.
func TestWatchLimitsBeforeAnyWork(t *testing.T) {
	_, k, s, _ := hookedPods(t, 3)
	s.watches = newWatchHub(4, 2)
	as := func(name string, sel string) (watch.Interface, error) {
		ctx := genericapirequest.WithUser(genericapirequest.WithNamespace(context.Background(), "ns-a"), &user.DefaultInfo{Name: name})
		return s.Watch(ctx, listOpts(t, sel, ""))
	}
	var open []watch.Interface
	for _, name := range []string{"alice", "alice", "bob"} {
		w, err := as(name, "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		open = append(open, w)
	}
	builds := k.builds.Load()
	if _, err := as("alice", "app=other"); !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "--max-watches-per-user") {
		t.Errorf("alice's third watch: %v, want 429 naming --max-watches-per-user", err)
	}
	w, err := as("carol", "")
	if err != nil {
		t.Fatalf("carol's first watch: %v", err)
	}
	open = append(open, w)
	if _, err := as("dave", "app=other"); !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "(--max-watches)") {
		t.Errorf("a fifth watch: %v, want 429 naming --max-watches", err)
	}
	if k.builds.Load() != builds {
		t.Error("a refused watch built its selection")
	}
	open[0].Stop()
	for range open[0].ResultChan() {
	}
	if w, err := as("alice", ""); err != nil {
		t.Errorf("alice after one of her watches ended: %v", err)
	} else {
		w.Stop()
	}
	for _, w := range open[1:] {
		w.Stop()
	}
}

// TestWatchPanicsContained: a panic in a watcher's goroutine or in its selection's feed ends those watches with an
// ERROR event, counted, and frees their slots; the process goes on.
func TestWatchPanicsContained(t *testing.T) {
	registerMetrics()
	for _, in := range []string{"empty", "same"} {
		t.Run(in, func(t *testing.T) {
			c, k, s, cpu := hookedPods(t, 2)
			before, _ := testutil.GetCounterMetricValue(watchPanics)
			ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
			w, err := s.Watch(ctx, &metainternalversion.ListOptions{AllowWatchBookmarks: true})
			if err != nil {
				t.Fatal(err)
			}
			events(t, w, 2)
			k.panicIn.Store(in)
			if in == "same" { // the feed compares the new collection's values with the previous ones
				cpu["ns-a/p000"] = 0.7
				c.cycle(nil, cpu)
			} else { // a collection without news: the watcher makes a bookmark
				c.store.BeginCycle().Commit(storage.Outcome{Success: true})
			}
			ev := next(t, w)
			if st, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || st.Code != 500 {
				t.Fatalf("after a panic: %s %+v, want an ERROR event with 500", ev.Type, ev.Object)
			}
			if _, ok := <-w.ResultChan(); ok {
				t.Fatal("the watch goes on after its error event")
			}
			if after, _ := testutil.GetCounterMetricValue(watchPanics); after != before+1 {
				t.Errorf("watch panics counted %v, want %v", after, before+1)
			}
			s.watches.mu.Lock()
			active := s.watches.active
			s.watches.mu.Unlock()
			if active != 0 {
				t.Errorf("%d watch slots still taken", active)
			}
		})
	}
}

// slowAndFast watches namespace ns-a twice on pods with more initial events than a watch's result buffer holds:
// the test reads fast and leaves slow unread. It returns the count of fallen-behind watches before they start;
// both watches stop when the test ends.
func slowAndFast(t *testing.T) (c *cluster, cpu map[string]float64, slow, fast watch.Interface, before float64) {
	t.Helper()
	registerMetrics()
	c, _, s, cpu := hookedPods(t, resultBuffer+10)
	before, _ = testutil.GetCounterMetricValue(watchesFellBehind.WithLabelValues(""))
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
	var err error
	if slow, err = s.Watch(ctx, &metainternalversion.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slow.Stop)
	if fast, err = s.Watch(ctx, &metainternalversion.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fast.Stop)
	events(t, fast, len(cpu))
	return c, cpu, slow, fast, before
}

// endedGone checks that slow got its initial events, then 410 Gone, and that one more watch was counted as fallen
// behind than before.
func endedGone(t *testing.T, slow watch.Interface, initial int, before float64) {
	t.Helper()
	// The feed queues a delivery to its watchers one after another, fast's possibly first: reading slow before the
	// last one reached it let slow take its queue, short of the lag, and wait for a 410 that never came.
	w := slow.(*watcher[storage.PodPoint])
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) { // bounded
		w.mu.Lock()
		behind := w.fellBack
		w.mu.Unlock()
		if behind || time.Now().After(deadline) {
			break
		}
	}
	n := 0
	for ev := range slow.ResultChan() {
		if ev.Type == watch.Error {
			if st, ok := ev.Object.(*metav1.Status); !ok || st.Code != 410 {
				t.Errorf("the slow watcher's error: %+v, want 410 Gone", ev.Object)
			}
			break
		}
		n++
	}
	if n != initial {
		t.Errorf("the slow watcher got %d events before its error, want its %d initial ones", n, initial)
	}
	if after, _ := testutil.GetCounterMetricValue(watchesFellBehind.WithLabelValues("")); after != before+1 {
		t.Errorf("watches fallen behind counted %v, want %v", after, before+1)
	}
}

// TestSlowWatcherEnded: a watcher whose client stops reading is ended with 410 Gone once it is more than
// maxWatchLag collections behind, counted; the other watchers of its selection are not held up.
func TestSlowWatcherEnded(t *testing.T) {
	c, cpu, slow, fast, before := slowAndFast(t)
	for i := 0; i <= maxWatchLag; i++ {
		c.cycle(nil, cpu)
		events(t, fast, len(cpu)) // one delivery per collection: the feed has queued it to slow as well
	}
	endedGone(t, slow, len(cpu), before)
}

// TestResumeAheadOfFeed: a client that resumes from a collection its selection's feed has not taken in yet (the
// feed waits for a build slot) gets nothing it already has, and then every later collection.
func TestResumeAheadOfFeed(t *testing.T) {
	c, _, s, cpu := hookedPods(t, 2)
	s.limit = newBuildLimit(1)
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
	a, err := s.Watch(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	events(t, a, 2)
	release, err := s.limit.acquire(ctx) // the feed cannot build the next collection
	if err != nil {
		t.Fatal(err)
	}
	g2 := c.cycle(nil, cpu)
	b, err := s.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: versionAt(s, g2), AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if ev := next(t, b); ev.Type != watch.Bookmark || rvOf(t, ev.Object) != g2 {
		t.Fatalf("resuming from the newest collection: %s at %d, want a BOOKMARK at %d", ev.Type, rvOf(t, ev.Object), g2)
	}
	release()
	wantEvents(t, events(t, a, 2), "MODIFIED ns-a/p000", "MODIFIED ns-a/p001")
	g3 := c.cycle(nil, cpu)
	got := events(t, b, 2)
	wantEvents(t, got, "MODIFIED ns-a/p000", "MODIFIED ns-a/p001")
	if rv := rvOf(t, got["MODIFIED ns-a/p000"].Object); rv != g3 {
		t.Errorf("the resumed watch's first event is at %d, want the next collection's %d", rv, g3)
	}
}
