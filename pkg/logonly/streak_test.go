package logonly

import "testing"

func TestStreak(t *testing.T) {
	var s Streak[string]
	for i, tc := range []struct {
		state string
		want  Change
	}{
		{"", Same}, {"warning", Began}, {"warning", Same}, {"error", Changed}, {"", Ended}, {"", Same}, {"panic", Began},
	} {
		if got := s.Set(tc.state); got != tc.want {
			t.Errorf("report %d (%q): change %d, want %d", i, tc.state, got, tc.want)
		}
	}
	var b Streak[bool]
	if b.Set(true) != Began || b.Set(true) != Same || b.Set(false) != Ended {
		t.Error("a bool streak does not begin, hold and end")
	}
}
