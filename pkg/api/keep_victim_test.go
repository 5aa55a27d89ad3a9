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
