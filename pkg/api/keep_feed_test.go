package api

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestWatchNotItsUsersFirstVictim: a user's watch goes on while the same user lists many distinct selections that
// each match everything: its lists evict its own older lists, not the feed its watch reads. Before, the feed,
// held once at join, stayed first in its user's order and was the first thing evicted: 410 Gone, list, watch, in
// a loop.
func TestWatchNotItsUsersFirstVictim(t *testing.T) {
	const budget = 4 << 20
	c, _, s, cpu := hookedPods(t, 2000)
	s.builds.keeper = newKeeper(budget)
	w, err := s.Watch(asUser("hpa"), listOpts(t, "", "metadata.name=p001"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	events(t, w, 1)
	for i := range 20 {
		if _, err := s.List(asUser("hpa"), listOpts(t, fmt.Sprintf("x!=v%d", i), "")); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
	}
	for k := range cpu {
		cpu[k] = 0.3
	}
	c.cycle(nil, cpu)
	wantEvents(t, events(t, w, 1), "MODIFIED ns-a/p001")
}

// TestCutWatcherQueuesNothing: a watch ended with 410 Gone to make room (its client not reading yet) takes none
// of the deliveries its feed publishes after: they are not charged while it waits. Before, it queued deliveries for up
// to four collections, charged to the feed's other users.
func TestCutWatcherQueuesNothing(t *testing.T) {
	kp := newKeeper(1 << 20)
	feed := &kept{user: "other", live: true, drop: func(string, bool) {}}
	kp.hold(feed, "other")
	w := &watcher[storage.PodPoint]{user: "u", version: "v1", wake: make(chan struct{}, 1), abort: make(chan struct{})}
	w.push(&delivery{drop: true, end: statusOf(apierrors.NewResourceExpired("list again"))})
	for cycle := range 3 {
		if !kp.admit(feed, 1000) {
			t.Fatal("a delivery was not admitted")
		}
		dv := &delivery{cycle: uint64(cycle), acct: &deliveryAccount{kp: kp, k: feed, refs: 1}}
		dv.acct.add(1000)
		w.push(dv)
		dv.release() // the feed's own reference
	}
	if total, _ := kp.usage(""); total != 0 {
		t.Errorf("%d bytes of deliveries charged after a cut watcher was queued them, want 0", total)
	}
}
