package api

import (
	"fmt"
	"testing"
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
