package storage

// The write path: a batch's samples from Cycle.Append to their series' rings (series.go), checked on the way
// (valid values and times, the node the pod is bound to, plausibility in plausible.go, predecessors in members.go),
// and the pods and nodes they touched marked for the next interim publication (interim.go).

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// store appends one batch's samples to their series (Cycle.Append).
func (s *Storage) store(b *Batch) Rejection {
	var rej Rejection
	now := s.clock.mono()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
	seq := s.batches
	prev := s.lastBatch[b.Key].ts
	newAfter := s.newAfter(prev)
	var newest int64 // this batch's newest sample time: a clock set back lowers it, so it is not max'ed with prev

	for i := range b.Nodes {
		smp := &b.Nodes[i]
		sr := s.nodes[smp.Node]
		if sr == nil {
			sr = newSeries(s.opts.History)
			s.nodes[smp.Node] = sr
		}
		if sr.batch != seq {
			s.touchNode(smp.Node)
		}
		if s.record(sr, b, &smp.Sample, seq, now, newAfter, &rej) {
			rej.Example = describe(smp.Node, &smp.Sample)
		}
		s.judgeNode(smp, sr, &rej)
		newest = max(newest, nanosOrZero(smp.Timestamp))
	}
	touched := s.touched[:0]
	for i := range b.Containers {
		smp := &b.Containers[i]
		key := podKey{smp.Namespace, smp.Pod}
		p := s.slots.get(key)
		if p == nil {
			// Not bound (PodBound): deleted (a kubelet reports a terminating pod for a while), or not Running yet.
			// Which pods exist is the informer's to say; keeping it would only bring back what PodDeleted dropped.
			continue
		}
		if b.Key != "" && p.node != b.Key {
			// Bound to another node: its samples would mix with that node's in one ring. Cluster-wide batches
			// (Prometheus, key "") carry no node to check.
			s.foreign(smp, p, &rej)
			continue
		}
		if p.predates(&smp.Sample) {
			predecessor(smp, &rej)
			continue
		}
		if p.batch != seq {
			s.touchPod(p.slot)
			p.batch = seq
			touched = append(touched, smp)
		}
		sr := p.series(smp.Container, s.opts.History)
		if s.record(sr, b, &smp.Sample, seq, now, newAfter, &rej) {
			rej.Example = describe(smp.Namespace+"/"+smp.Pod+"/"+smp.Container, &smp.Sample)
		}
		newest = max(newest, nanosOrZero(smp.Timestamp))
	}
	for _, smp := range touched { // once its batch's containers are in: a pod's plausibility is their sum's
		s.judgePod(smp, seq, &rej)
	}
	clear(touched) // the batch's: do not keep it alive
	s.touched = touched[:0]
	if newest == 0 {
		newest = prev // no samples: the previous batch is still the newest one
	}
	s.lastBatch[b.Key] = batchMark{ts: newest, seen: now}
	count(rej)
	return rej
}

// count adds a batch's rejections to the self-metrics.
func count(rej Rejection) {
	for reason, n := range map[string]int{"foreign": rej.Foreign, "invalid": rej.Invalid, "zero": rej.Zero,
		"invalid_swap": rej.InvalidSwap, "implausible": rej.Implausible, "invalid_start": rej.InvalidStart,
		"predecessor": rej.Predecessor} {
		if n > 0 {
			samplesRejected.WithLabelValues(reason).Add(float64(n))
		}
	}
}

// newAfter is when a container first seen in a batch must have started after to count from zero at its start
// (series.add), given prev, the newest sample time of the previous batch of the same key (0: none). One resolution
// before it, not prev itself: that batch may have missed a container that had started (its pod not yet bound, the
// informer's Running event a little behind the kubelet, or not yet in the kubelet's report), which would then wait a
// cycle longer than the others for a second sample; its counter still starts from zero at its start, so the span
// served is a true average. That span is under two resolutions when no scrape of the key failed since prev, and at
// most --stale-after plus half a resolution when some did (series.usage's bound of a missed scrape's span): longer
// than --window, as a missed scrape's span is (DESIGN.md section 2), and said in the point's window. A node
// clock stepped back by more than a few seconds between the two batches, while the container started, can shorten
// the span the counter is divided by and read high; the plausibility check still bounds it by the node's capacity.
// Nothing is new at a key's first batch: a container seen then may have run for hours.
func (s *Storage) newAfter(prev int64) int64 {
	if prev == 0 {
		return 0
	}
	return max(1, prev-int64(s.opts.Resolution))
}

// record validates one sample and appends it to its series. It reports whether the sample is the batch's first
// rejected one, so the caller names it (only then: building names per sample would allocate).
func (s *Storage) record(sr *series, b *Batch, smp *Sample, seq uint64, now, newAfter int64, rej *Rejection) bool {
	sr.batch = seq
	ts, inRange := sampleNanos(smp.Timestamp)
	invalid, zero := validate(b.CPU, smp)
	invalid = invalid || !inRange // a time UnixNano would wrap: no arithmetic on it
	sr.bad = invalid || zero
	if !sr.bad {
		start, badStart := startNanos(smp.StartTime, ts)
		swap, badSwap := validSwap(smp)
		if sr.add(point{ts: ts, cpu: smp.CPU}, start, b.CPU, b.Window, newAfter, int64(s.opts.StaleAfter)) {
			sr.seen = now // staleness counts from the newest new sample, not from repeats or ignored ones
			sr.mem, sr.swap = smp.Memory, swap
		}
		if badStart {
			rej.InvalidStart++
		}
		if badSwap {
			rej.InvalidSwap++
		}
		return (badStart || badSwap) && rej.Example == ""
	}
	sr.seen = now // a rejected series is not served anyway; kept, it is not reallocated at every report
	if invalid {
		rej.Invalid++
	} else {
		rej.Zero++
	}
	return rej.Example == ""
}

// nanosOrZero is a sample time in Unix nanoseconds, 0 when out of range (sampleNanos).
func nanosOrZero(t time.Time) int64 {
	ns, _ := sampleNanos(t)
	return ns
}

// foreign counts a container sample of a pod bound to another node than the batch's. Called with s.mu held.
func (s *Storage) foreign(smp *ContainerSample, p *pod, rej *Rejection) {
	rej.Foreign++
	if rej.ForeignPod == "" { // only the first: building names per sample would allocate
		rej.ForeignPod = smp.Namespace + "/" + smp.Pod + " (bound to node " + strconv.Quote(p.node) + ")"
	}
}

// series returns the container's series, creating it when new.
func (p *pod) series(name string, history int) *series {
	for i := range p.containers {
		if p.containers[i].name == name {
			return p.containers[i].series
		}
	}
	sr := newSeries(history)
	i, _ := slices.BinarySearchFunc(p.containers, name, func(c container, name string) int {
		return strings.Compare(c.name, name)
	})
	p.containers = slices.Insert(p.containers, i, container{name: name, series: sr})
	return sr
}

// maxStartAge is how long before its sample a start time may be and still be read as one: a century, longer than
// any machine runs, and short enough that no difference of two times storage keeps overflows int64 nanoseconds
// (their range is 292 years; sample times are after 1970).
const maxStartAge = 100 * 365 * 24 * time.Hour

// The range of times that int64 Unix nanoseconds hold: time.Time.UnixNano of a time outside it wraps.
var (
	minNanos = time.Unix(0, 1) // sample times are after 1970: a zero or negative one is garbage
	maxNanos = time.Unix(0, math.MaxInt64)
)

// sampleNanos returns a sample time as Unix nanoseconds; ok is false when it is outside (1970, 2262].
func sampleNanos(t time.Time) (ns int64, ok bool) {
	if t.Before(minNanos) || t.After(maxNanos) {
		return 0, false
	}
	return t.UnixNano(), true
}

// startNanos returns a start time as Unix nanoseconds for a sample at ts, 0 when unknown (zero). invalid reports a
// start time after its sample, or more than maxStartAge before it: read as unknown, not as a restart to the year
// 2610 (a container_start_time_seconds of 2.02e10 wrapped into int64 nanoseconds served 10,017 cores).
func startNanos(t time.Time, ts int64) (ns int64, invalid bool) {
	if t.IsZero() {
		return 0, false
	}
	if t.After(time.Unix(0, ts)) || t.Before(time.Unix(0, ts-int64(maxStartAge))) {
		return 0, true
	}
	return t.UnixNano(), false
}

// validate reports whether a sample cannot be served: invalid (NaN, infinite or negative) or zero. A rate of zero is an idle container; a
// cumulative counter or a working set of exactly zero is a broken source (cgroup v2 misconfiguration).
func validate(kind CPUKind, smp *Sample) (invalid, zero bool) {
	for _, v := range [2]float64{smp.CPU, smp.Memory} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return true, false
		}
	}
	if smp.Memory == 0 || (kind == CPUCumulative && smp.CPU == 0) {
		return false, true
	}
	return false, false
}

// validSwap returns the sample's swap value to store: NaN when it has none. invalid reports a swap value that is
// NaN, infinite or negative, which loses the swap alone (DESIGN.md section 2).
func validSwap(smp *Sample) (swap float64, invalid bool) {
	if !smp.HasSwap {
		return math.NaN(), false
	}
	if v := smp.Swap; math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return math.NaN(), true
	}
	return smp.Swap, false
}

// describe names one rejected sample for a log line.
func describe(name string, smp *Sample) string {
	swap := ""
	if smp.HasSwap {
		swap = fmt.Sprintf(" swap=%g", smp.Swap)
	}
	return fmt.Sprintf("%s: cpu=%g memory=%g%s at %s", name, smp.CPU, smp.Memory, swap,
		smp.Timestamp.UTC().Format(time.RFC3339))
}
