package api

import (
	"fmt"
	"testing"
)

// TestKeeperSharedNotCascaded: a small admission by a new user does not make the holders of a shared thing let go
// of it one by one: letting go of what others still hold frees nothing. Before, 100 users sharing a watch feed
// charged nearly the whole budget all let go of it (100 drops, every watcher got 410) for a new user's small build.
func TestKeeperSharedNotCascaded(t *testing.T) {
	tests := []struct {
		name    string
		holders int
		bytes   int64 // what the shared thing is charged, of a budget of 6400
		add     int64 // the new user's admission
	}{
		{"100 holders, nearly full", 100, 6395, 10},
		{"10 holders, nearly full", 10, 6380, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp := newKeeper(6400)
			shared := &kept{user: "u0", drop: func(string, bool) {}}
			for i := range tt.holders {
				kp.hold(shared, fmt.Sprintf("u%d", i))
			}
			if !kp.admit(shared, tt.bytes) {
				t.Fatal("the shared thing was not admitted")
			}
			small := &kept{user: "new", drop: func(string, bool) {}}
			kp.hold(small, "new")
			kp.admit(small, tt.add)
			kp.mu.Lock()
			held := len(shared.holders)
			kp.mu.Unlock()
			if held != tt.holders {
				t.Errorf("the shared thing has %d holders after a new user's %d bytes, want all %d", held, tt.add, tt.holders)
			}
		})
	}
}

// TestKeeperWatchTakesColdRoom: a new user's watch feed over its share of the budget, with nothing of its own to let
// go of, evicts other users' builds (which can be built again) rather than being refused with 429; it is refused
// only when what the others keep is all watch feeds. Before, with 100 users each keeping a cached list, a new
// user's cluster-wide watch was refused.
func TestKeeperWatchTakesColdRoom(t *testing.T) {
	tests := []struct {
		name       string
		othersLive bool
		want       bool
	}{
		{"others keep builds", false, true},
		{"others keep watch feeds", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp := newKeeper(102400)
			for i := range 100 {
				k := &kept{user: fmt.Sprintf("u%d", i), live: tt.othersLive, drop: func(string, bool) {}}
				kp.hold(k, k.user)
				if !kp.admit(k, 1000) {
					t.Fatalf("user %d's 1000 bytes not admitted", i)
				}
			}
			feed := &kept{user: "new", live: true, drop: func(string, bool) {}}
			kp.hold(feed, "new")
			if got := kp.admit(feed, 5120); got != tt.want {
				t.Errorf("a new user's watch of 5120 bytes admitted: %v, want %v", got, tt.want)
			}
			if total, _ := kp.usage(""); total > 102400 {
				t.Errorf("%d bytes kept, over the budget", total)
			}
		})
	}
}
