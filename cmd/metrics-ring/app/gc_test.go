package app

import (
	"context"
	"os"
	"runtime/debug"
	"testing"
	"time"
)

// Without GOGC, metrics-ring runs at its own GC percent; with it, the operator's value is left alone.
func TestSetGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "80") // restores the variable when the test ends, also after the Unsetenv below
	debug.SetGCPercent(80)
	if got := setGCPercent(); got != 80 {
		t.Errorf("GOGC=80: percent %d, want 80", got)
	}
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	if got := setGCPercent(); got != defaultGCPercent {
		t.Errorf("no GOGC: setGCPercent says %d, want %d", got, defaultGCPercent)
	}
	if got := debug.SetGCPercent(defaultGCPercent); got != defaultGCPercent {
		t.Errorf("no GOGC: the runtime's percent is %d, want %d", got, defaultGCPercent)
	}
}

// Freed heap is returned when it is start-up garbage, not the headroom the heap grows into before its next
// collection, nor the little the scavenger keeps in a steady state.
func TestWorthReturning(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name string
		h    heapStats
		want bool
	}{
		{"steady state: free is the headroom", heapStats{free: 30 * mib, objects: 140 * mib, goal: 170 * mib}, false},
		{"steady state: a tenth of the goal beyond it", heapStats{free: 47 * mib, objects: 140 * mib, goal: 170 * mib}, false},
		{"after a handshake storm", heapStats{free: 400 * mib, objects: 1400 * mib, goal: 1750 * mib}, false},
		{"after a larger one", heapStats{free: 900 * mib, objects: 1400 * mib, goal: 1750 * mib}, true},
		{"small heap: under 32 MiB is not worth a collection", heapStats{free: 30 * mib, objects: 10 * mib, goal: 20 * mib}, false},
		{"small heap, large start-up peak", heapStats{free: 100 * mib, objects: 10 * mib, goal: 20 * mib}, true},
		{"objects past the goal", heapStats{free: 40 * mib, objects: 200 * mib, goal: 170 * mib}, true},
	} {
		if got := tc.h.worthReturning(); got != tc.want {
			t.Errorf("%s: %+v (excess %d MiB): worthReturning %v, want %v", tc.name, tc.h, tc.h.idleExcess()/mib, got, tc.want)
		}
	}
}

// settle looks a bounded number of times, returns memory only when it is worth it, and stops with its context.
func TestSettle(t *testing.T) {
	const mib = 1 << 20
	idle := heapStats{free: 20 * mib, objects: 100 * mib, goal: 125 * mib}
	peak := heapStats{free: 300 * mib, objects: 100 * mib, goal: 125 * mib}
	ticks := make(chan time.Time, 10)
	for range 10 {
		ticks <- time.Time{}
	}
	reads := []heapStats{peak, idle, peak, idle, idle, idle, idle, idle, peak, peak}
	read := func() heapStats { h := reads[0]; reads = reads[1:]; return h }
	frees := 0
	if got := settle(context.Background(), ticks, 8, read, func() { frees++ }); got != 2 || frees != 2 {
		t.Errorf("settle returned memory %d times (%d calls), want 2 in 8 looks", got, frees)
	}
	if len(reads) != 2 {
		t.Errorf("settle read the heap %d times, want 8", 10-len(reads))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := settle(ctx, make(chan time.Time), 8, read, func() { frees++ }); got != 0 {
		t.Errorf("settle after its context ended returned memory %d times", got)
	}
}
