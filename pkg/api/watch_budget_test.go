package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestWatchFeedsKeepWithinBudget: one user's many watches on distinct selectors that each match everything, left
// unread, keep what their feeds hold (queued deliveries, the builds they lead to) within the readers' budget: the
// user's own watches end with 410 Gone (the client lists again), another user's small watch goes on. Before feeds
// were charged, 60 such watches of 2,000 pods over 3 collections grew the heap by about 100 MiB with a 4 MiB budget.
func TestWatchFeedsKeepWithinBudget(t *testing.T) {
	const budget = 4 << 20
	c, _, s, cpu := hookedPods(t, 2000)
	s.builds.keeper = newKeeper(budget)
	hpa, err := s.Watch(asUser("hpa"), listOpts(t, "", "metadata.name=p001"))
	if err != nil {
		t.Fatal(err)
	}
	defer hpa.Stop()
	events(t, hpa, 1)
	before := heapInUse()
	var mallory []watch.Interface
	for i := range 60 {
		w, err := s.Watch(asUser("mallory"), listOpts(t, fmt.Sprintf("x!=v%d", i), ""))
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		defer w.Stop()
		mallory = append(mallory, w)
	}
	for i := 1; i < maxWatchLag; i++ { // fewer than maxWatchLag: no watch falls behind by lag alone
		for k := range cpu {
			cpu[k] = 0.1 + float64(i%2)*0.1
		}
		c.cycle(nil, cpu)
		wantEvents(t, events(t, hpa, 1), "MODIFIED ns-a/p001")
		if total, _ := s.builds.keeper.usage(""); total > budget {
			t.Fatalf("after collection %d the readers keep %d bytes, over the budget of %d", i, total, budget)
		}
	}
	if grown := heapGrowth(before, budget); grown > budget+heapSlack {
		t.Errorf("60 unread watches of one user grew the heap by %d MiB, want at most the budget (%d MiB) and %d MiB",
			grown>>20, budget>>20, heapSlack>>20)
	}
	ended := 0
	for _, w := range mallory {
		if endedWith410(w) {
			ended++
		}
	}
	t.Logf("%d of %d watches ended with 410 Gone", ended, len(mallory))
	if ended == 0 {
		t.Error("none of the user's watches was ended with 410 Gone, though what they hold is over the budget")
	}
}

// endedWith410 reads w to its end (or until it is quiet for a moment) and reports whether it ended with 410 Gone.
func endedWith410(w watch.Interface) bool {
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false
			}
			if ev.Type == watch.Error {
				st, ok := ev.Object.(*metav1.Status)
				return ok && st.Code == 410
			}
		case <-time.After(100 * time.Millisecond):
			return false
		}
	}
}

// TestWatchBeyondBudgetRefused: a watch whose selection alone is more than the readers' budget is refused with 429
// naming the budget, before it holds anything; a small one of the same user is served.
func TestWatchBeyondBudgetRefused(t *testing.T) {
	_, _, s, _ := hookedPods(t, 2000)
	s.builds.keeper = newKeeper(64 << 10)
	_, err := s.Watch(asUser("alice"), listOpts(t, "", ""))
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "--reader-cache-bytes") {
		t.Fatalf("a watch of 2,000 pods with a 64 KiB budget: %v, want 429 naming --reader-cache-bytes", err)
	}
	if total, _ := s.builds.keeper.usage(""); total != 0 {
		t.Errorf("the refused watch left %d bytes kept", total)
	}
	w, err := s.Watch(asUser("alice"), listOpts(t, "", "metadata.name=p001"))
	if err != nil {
		t.Fatalf("a watch of one pod: %v", err)
	}
	defer w.Stop()
	events(t, w, 1)
}
