package main

import (
	"context"
	"testing"
	"time"
)

// untilQuiet returns at the first tick over which the processes used less than quietCores, and gives up at max.
func TestUntilQuiet(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cores     []float64 // load over each successive tick
		max       time.Duration
		wantTicks int
		wantQuiet bool
	}{
		{"quiet at once", []float64{0.1}, time.Minute, 1, true},
		{"settles after registration", []float64{1.9, 1.2, 0.6, 0.2, 0.1}, time.Minute, 4, true},
		{"never settles", []float64{1.5, 1.5, 1.5, 1.5, 1.5}, 15 * time.Second, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The k-th read of the CPU time (after the first) is the k-th tick's: the clock moves on with it.
			reads := 0
			var used time.Duration
			cpu := func() time.Duration {
				if reads > 0 {
					used += time.Duration(tc.cores[reads-1] * float64(quietEvery))
				}
				reads++
				return used
			}
			now := func() time.Time { return time.Unix(0, 0).Add(time.Duration(max(0, reads-1)) * quietEvery) }
			ticks := make(chan time.Time, len(tc.cores))
			for range tc.cores {
				ticks <- time.Time{}
			}
			waited, _, quiet := untilQuiet(context.Background(), cpu, ticks, now, tc.max)
			if quiet != tc.wantQuiet || waited != time.Duration(tc.wantTicks)*quietEvery {
				t.Errorf("waited %s (quiet %v), want %s (quiet %v)", waited, quiet,
					time.Duration(tc.wantTicks)*quietEvery, tc.wantQuiet)
			}
		})
	}
}
