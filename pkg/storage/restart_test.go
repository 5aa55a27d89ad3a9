package storage

import (
	"math"
	"testing"
	"time"
)

// wrapsTo is a start time past the int64-nanosecond range (about 2.02e10 s, the year 2611) whose UnixNano wraps to
// the given time: what a garbage container_start_time_seconds became before it was read as invalid.
func wrapsTo(t time.Time) time.Time {
	const wrap = uint64(1) << 63 // 2^64 ns, split in two to stay within int64
	ns := uint64(t.UnixNano()) + wrap
	sec, rest := ns/1e9, ns%1e9
	sec2, rest2 := wrap/1e9, wrap%1e9
	return time.Unix(int64(sec+sec2), int64(rest+rest2))
}

// TestRestartsAndTimes follows DESIGN.md section 2: any change of a known start time (forward or back), a counter
// that goes backwards, or a sample time more than --stale-after older than the newest starts a series afresh;
// smaller steps back are ignored; a start time after its sample or absurdly before it is invalid (read as
// unknown, counted), a sample time outside int64 nanoseconds is invalid, and no arithmetic overflows.
func TestRestartsAndTimes(t *testing.T) {
	sec := time.Second
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		at    time.Duration // the sample's time and the batch's, from t0
		ts    time.Time     // the sample's time when not t0+at
		start time.Time
		cpu   float64
	}
	old, fresh := at(-time.Hour), at(10*sec) // an instance running for an hour, one started at 10 s
	cases := []struct {
		name             string
		steps            []step
		wantOK           bool
		wantCPU          uint64 // nanocores
		wantInvalidStart int    // over the steps
		wantInvalid      int
	}{
		{name: "a start time that moves back (the old instance of the name reported again) starts afresh",
			// The new instance served 0.1 core; then the old one's 3,600 core-seconds made 240 cores of it.
			steps:  []step{{at: 0, start: old, cpu: 3600}, {at: 15 * sec, start: fresh, cpu: 0.5}, {at: 30 * sec, start: old, cpu: 3602}},
			wantOK: false},
		{name: "two instances alternating serve one instance's truth or nothing, never a mix",
			steps: []step{{at: 0, start: old, cpu: 3600}, {at: 15 * sec, start: fresh, cpu: 0.5},
				{at: 30 * sec, start: old, cpu: 3603}, {at: 45 * sec, start: fresh, cpu: 4}, {at: 60 * sec, start: fresh, cpu: 5.5}},
			wantOK: true, wantCPU: 100_000_000},
		{name: "a start time that moves forward starts afresh from the new start",
			steps:  []step{{at: 0, start: old, cpu: 3600}, {at: 15 * sec, start: old, cpu: 3601}, {at: 30 * sec, start: at(20 * sec), cpu: 1}},
			wantOK: true, wantCPU: 100_000_000},
		{name: "a start time past int64 nanoseconds is invalid, not a start 5 s before the sample",
			// Read as a start at 10 s it made a zero point there: 3,600 core-seconds in 5 s, 720 cores.
			steps: []step{{at: 0, start: old, cpu: 3599}, {at: 15 * sec, start: wrapsTo(at(10 * sec)), cpu: 3600.5}},
			// The start went from known to unknown: the series goes on.
			wantOK: true, wantCPU: 100_000_000, wantInvalidStart: 1},
		{name: "a start time that goes from known to unknown (no longer reported) keeps the series",
			steps:  []step{{at: 0, start: old, cpu: 3600}, {at: 15 * sec, cpu: 3601.5}},
			wantOK: true, wantCPU: 100_000_000},
		{name: "a known start time that changed while unknown meanwhile starts afresh, from the new start",
			// Started within a resolution before the previous scrape: its own 2 core-seconds over 20 s.
			steps:  []step{{at: 0, start: old, cpu: 3600}, {at: 15 * sec, cpu: 3601.5}, {at: 30 * sec, start: fresh, cpu: 2}},
			wantOK: true, wantCPU: 100_000_000},
		{name: "an invalid start time kept serves the counter's rate",
			steps:  []step{{at: 0, start: wrapsTo(at(-sec)), cpu: 3600}, {at: 15 * sec, start: wrapsTo(at(10 * sec)), cpu: 3601.5}},
			wantOK: true, wantCPU: 100_000_000, wantInvalidStart: 2},
		{name: "a start time after its sample is invalid",
			steps:  []step{{at: 0, start: at(-sec), cpu: 10}, {at: 15 * sec, start: at(time.Hour), cpu: 11.5}, {at: 30 * sec, start: at(time.Hour), cpu: 13}},
			wantOK: true, wantCPU: 100_000_000, wantInvalidStart: 2},
		{name: "a start time more than a century before its sample is invalid",
			steps:  []step{{at: 0, start: time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), cpu: 10}, {at: 15 * sec, start: time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), cpu: 11.5}},
			wantOK: true, wantCPU: 100_000_000, wantInvalidStart: 2},
		{name: "a counter that goes backwards starts afresh",
			steps:  []step{{at: 0, start: old, cpu: 100}, {at: 15 * sec, start: old, cpu: 101}, {at: 30 * sec, start: old, cpu: 50}},
			wantOK: false},
		{name: "a sample a little older than the newest is ignored",
			steps:  []step{{at: 0, start: old, cpu: 100}, {at: 15 * sec, start: old, cpu: 101.5}, {at: 30 * sec, ts: at(5 * sec), start: old, cpu: 999}},
			wantOK: true, wantCPU: 100_000_000},
		{name: "a sample more than stale-after older than the newest starts afresh",
			steps:  []step{{at: 0, ts: at(time.Hour), start: old, cpu: 100}, {at: 15 * sec, ts: at(time.Hour + 15*sec), start: old, cpu: 101.5}, {at: 30 * sec, start: old, cpu: 102}},
			wantOK: false},
		{name: "a sample time past int64 nanoseconds is invalid",
			steps:       []step{{at: 0, start: old, cpu: 100}, {at: 15 * sec, ts: wrapsTo(at(14 * sec)), start: old, cpu: 1e6}},
			wantOK:      false, // the newest report was rejected: nothing older is served
			wantInvalid: 1},
		{name: "a rate beyond uint64 nanocores saturates rather than wrapping",
			steps:  []step{{at: 0, start: old, cpu: 1}, {at: 15 * sec, start: old, cpu: 1e300}},
			wantOK: true, wantCPU: math.MaxUint64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(Options{})
			f.bind("p")
			var rej Rejection
			for _, s := range tc.steps {
				ts := s.ts
				if ts.IsZero() {
					ts = at(s.at)
				}
				c := ContainerSample{Namespace: "ns", Pod: "p", Container: "app",
					Sample: Sample{Timestamp: ts, StartTime: s.start, CPU: s.cpu, Memory: 1e6}}
				rej.Add(f.scrape(s.at, nil, []ContainerSample{c}))
			}
			if rej.InvalidStart != tc.wantInvalidStart || rej.Invalid != tc.wantInvalid {
				t.Errorf("rejections %+v, want invalid start times %d, invalid samples %d", rej, tc.wantInvalidStart, tc.wantInvalid)
			}
			got, ok := f.Pod("ns", "p")
			if ok != tc.wantOK {
				t.Fatalf("servable = %v, want %v (%+v)", ok, tc.wantOK, got.Containers())
			}
			if ok && got.Containers()[0].CPU != tc.wantCPU {
				t.Errorf("cpu = %d nanocores, want %d", got.Containers()[0].CPU, tc.wantCPU)
			}
		})
	}
}
