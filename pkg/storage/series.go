package storage

import (
	"math"
	"time"
)

// point is one stored sample: what a CPU rate needs. Times are Unix nanoseconds so a ring is one flat allocation
// with no pointers for the garbage collector to scan. Memory and swap are served at the newest sample only, so they
// are kept once per series (series.mem, series.swap), not in every point: 16 bytes a sample instead of 24, a third
// of the rings (BENCHMARKS.md, "Figures behind the comments").
type point struct {
	ts  int64
	cpu float64 // core-seconds (cumulative) or cores (rate)
}

// series is the ring of one node's or container's samples. All fields are guarded by Storage.mu.
type series struct {
	points []point // fixed capacity History; points[head] is the newest
	head   int32
	n      int32

	kind   CPUKind
	window time.Duration // of CPURate samples
	start  int64         // the last known start time of its samples, Unix nanoseconds; 0 when none was known
	seen   int64         // when the series last received a new sample, on storage's clock (Storage.mono)
	batch  uint64        // sequence number of the newest Append that reported this series
	bad    bool          // the newest report was rejected: serve nothing rather than an older value
	// mem is the working set of the newest point in bytes, and swap its swap usage, NaN when it had none (not
	// reported, or invalid): only the newest values are served.
	mem, swap float64
}

func newSeries(history int) *series {
	return &series{points: make([]point, history), head: -1, swap: math.NaN()}
}

// reset forgets every sample, keeping the allocation.
func (s *series) reset() {
	s.head, s.n = -1, 0
}

func (s *series) push(p point) {
	s.head++
	if int(s.head) == len(s.points) {
		s.head = 0
	}
	s.points[s.head] = p
	if int(s.n) < len(s.points) {
		s.n++
	}
}

// newest returns the newest sample; callers check n > 0.
func (s *series) newest() point { return s.points[s.head] }

// at returns the i-th newest sample (0 is the newest).
func (s *series) at(i int32) point {
	j := s.head - i
	if j < 0 {
		j += int32(len(s.points))
	}
	return s.points[j]
}

// minFreshSpan is how long a new container must have run at its first sample for that sample to be served from its
// start: metrics-server's freshContainerMinMetricsResolution, so that the two servers agree on when a new pod is
// first served and over which span (a span of a few seconds is the process's start-up, a runtime initialising,
// which may read above what the container goes on to use). metrics-server counts a container as fresh while its
// span is under one resolution; here it is one that started after Storage.newAfter. Such a container is served at
// its second sample, over the span between the two.
const minFreshSpan = 10 * time.Second

// add appends a valid sample and reports whether it was new (not a repeat, not ignored). start is its start time
// (0 when unknown or invalid, see startNanos). A container first seen that started after newAfter (see
// Storage.newAfter; 0: none is new) is new, so its usage counts from zero at its start time and it is servable
// after one sample, if that sample is minFreshSpan after its start. staleAfter is --stale-after in nanoseconds: a
// sample that much older than the newest is a source clock that was wrong and was set back (DESIGN.md section 2).
func (s *series) add(p point, start int64, kind CPUKind, window time.Duration, newAfter, staleAfter int64) bool {
	if s.n > 0 {
		last := s.newest()
		switch {
		case start != 0 && s.start != 0 && start != s.start, kind != s.kind:
			// A restart: any change of a known start time, forward or back (two instances of one pod name
			// alternate after a force-delete and re-create on one node: a rate across their counters was 240
			// cores), or a change of source. A start time no longer known (not reported, or invalid) is no
			// restart: the series goes on, compared with the last known one; a counter that went back still is.
			s.reset()
		case p.ts == last.ts:
			return false // a repeat: the kubelet served the same stats again
		case p.ts < last.ts && last.ts-p.ts <= staleAfter:
			return false // a little older than what we have (a clock slewed back): never rewind a series for it
		case p.ts < last.ts, kind == CPUCumulative && p.cpu < last.cpu:
			// A clock set back from the future (waiting for it to pass the newest sample would freeze the series
			// on values from the future) or a counter reset: start afresh.
			s.reset()
		}
	}
	s.kind, s.window = kind, window
	if start != 0 {
		s.start = start
	}
	if s.n == 0 && kind == CPUCumulative && newAfter != 0 && start > newAfter && start <= p.ts-int64(minFreshSpan) {
		s.push(point{ts: start})
	}
	s.push(p)
	return true
}

// usage computes what is served for the series, per DESIGN.md section 2. ok is false when it is not servable.
// staleAfter bounds the fallback for a missed scrape, below.
func (s *series) usage(window, resolution, staleAfter time.Duration) (u Usage, ts int64, w time.Duration, ok bool) {
	if s.n == 0 || s.bad {
		return Usage{}, 0, 0, false
	}
	last := s.newest()
	u.Memory = saturate(s.mem)
	if !math.IsNaN(s.swap) {
		u = u.WithSwap(saturate(s.swap))
	}
	if s.kind == CPURate {
		u.CPU = nanocores(last.cpu)
		return u, last.ts, s.window, true
	}
	// The oldest sample no older than the window plus half a resolution: kubelet stats times jitter, so a sample
	// one resolution back may be a little more than one resolution old.
	limit := last.ts - int64(window+resolution/2)
	first := last
	for i := int32(1); i < s.n; i++ {
		p := s.at(i)
		if p.ts < limit {
			break
		}
		first = p
	}
	if first.ts == last.ts && s.n > 1 {
		// No older sample within the window: a scrape was missed, or collection fell behind. The previous sample,
		// if it is not stale, still gives a true average over the longer gap (served as the window); otherwise
		// the series would vanish for a whole interval right after it recovered, which is what a missed scrape
		// must never do (DESIGN.md section 2: a node missed once keeps being served until --stale-after).
		if prev := s.at(1); last.ts-prev.ts <= int64(staleAfter+resolution/2) {
			first = prev
		}
	}
	if first.ts == last.ts {
		return Usage{}, 0, 0, false
	}
	dt := time.Duration(last.ts - first.ts)
	u.CPU = nanocores((last.cpu - first.cpu) / dt.Seconds())
	return u, last.ts, dt, true
}

func nanocores(cores float64) uint64 { return saturate(math.Round(cores * 1e9)) }

// saturate converts a valid value (finite, not negative) to uint64, saturating where the conversion of a larger
// float would be implementation-defined (on amd64, 2^63: 9.2 billion cores).
func saturate(v float64) uint64 {
	if v >= math.MaxUint64 { // 2^64 as a float64
		return math.MaxUint64
	}
	return uint64(v)
}
