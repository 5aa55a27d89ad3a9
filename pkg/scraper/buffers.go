package scraper

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
)

// buffers are the response buffers and gzip readers the Scraper's workers read kubelet bodies into, and what decides
// how many, and how large, are kept between scrapes. A worker borrows one (lend) once its response has come, not
// while it waits for the kubelet, and gives it back (giveBack) as soon as the body is parsed: the batch holds the
// parser's interned names, never bytes of the body. Workers wait for the kubelet most of a scrape, and a large
// cluster's cycle runs up to maxWorkers of them at once (pace.go): when each kept its own, their buffers were held
// between cycles and all touched in every cycle. So what is kept follows the scrapes that read a body at the same
// time: the most that were out at once in the previous cycle (at least floor). A fixed cap of floor made every scrape
// beyond the floor at once allocate both anew, a large part of the process' CPU in garbage collection (BENCHMARKS.md,
// "Figures behind the comments").
//
// A scrape is lent the smallest spare that fits the node's previous body, as Prometheus' scrape pool does by the
// target's last scrape size: lent in turn, every spare came to hold the largest body it had ever read, so a few
// large nodes grew them all, one class at a time over hours (BENCHMARKS.md, "Two hours at 48fa82f"). Fitted, a
// spare grows only when no free one is large enough, so the large ones number the large bodies read at once. Kept
// while the spares' count allowed, they came to number the most ever read at once, a rise through every hour
// measured (BENCHMARKS.md, "Figures behind the comments"): a spare lent only to bodies under half its size for
// spareIdleCycles cycles running goes, and a buffer sized for the body that needs it takes its place.
type buffers struct {
	mu    sync.Mutex
	floor int
	max   int       // spares kept: max(floor, the previous cycle's peak)
	free  []scratch // by capacity, smallest first
	// out counts what workers borrowed (from the spares or new) and have not given back; peak is its most since
	// the previous endCycle.
	out, peak int
	// retain is the largest buffer kept (retainFor the previous cycle's mean body), and mean that body: what a
	// node not read before is expected to send.
	retain, mean int
	// Bodies parsed this cycle and their bytes, for the next cycle's retain.
	bodies, bodyBytes atomic.Int64
	cycle             uint64 // endCycles so far: the stamps' clock
}

// scratch is one spare: a body buffer and a gzip reader, lent together, and when the buffer was last needed.
type scratch struct {
	buf []byte
	gz  *gzip.Reader
	stamps
}

// stamps say when a spare was last needed at its size; the borrower carries them back to giveBack.
type stamps struct {
	// fitAt is the last cycle the buffer held a body over half its capacity, or was not lent (idle is not
	// oversized: the spares' count follows the peak); lentAt the last cycle it was lent.
	fitAt, lentAt uint64
}

// spareIdleCycles is how many cycles running a spare may be lent only to bodies under half its size before it
// goes: 5 minutes at the default 15 s resolution, long enough that a burst's large spares serve the bursts that
// recur, short enough that one burst does not keep them for good.
const spareIdleCycles = 20

// newBuffers keeps at least floor spares (--kubelet-concurrency).
func newBuffers(floor int) *buffers {
	return &buffers{floor: floor, max: floor, retain: retainFor(0)}
}

// lend returns the smallest spare that holds a body of want bytes (the node's previous; 0 for the previous cycle's
// mean), or the largest spare when none does, or an empty scratch (the caller allocates on demand); either way the
// caller has borrowed one, which giveBack takes back.
func (b *buffers) lend(want int) scratch {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out++
	b.peak = max(b.peak, b.out)
	n := len(b.free)
	if n == 0 {
		return scratch{stamps: stamps{fitAt: b.cycle, lentAt: b.cycle}}
	}
	if want <= 0 {
		want = b.mean
	}
	// readCapped reads into all but the last byte and needs a byte more to see the end.
	i := min(n-1, sort.Search(n, func(i int) bool { return cap(b.free[i].buf) >= want+2 }))
	sc := b.free[i]
	copy(b.free[i:], b.free[i+1:])
	b.free[n-1] = scratch{}
	b.free = b.free[:n-1]
	sc.buf, sc.lentAt = sc.buf[:0], b.cycle
	return sc
}

// giveBack takes back what lend lent, its buffer holding the body read (it may have grown, or be nil), keeping at
// most max spares. A buffer grown beyond the retain limit is dropped, and giveBack says so: the worker's batch,
// whose slices grew with that response, goes too once stored.
func (b *buffers) giveBack(sc scratch) (oversized bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cap(sc.buf) > b.retain {
		sc.buf, oversized = nil, true
	}
	fit := len(sc.buf)+2 > cap(sc.buf)/2
	if fit {
		sc.fitAt = b.cycle
	}
	b.out--
	if len(b.free) < b.max && (cap(sc.buf) > 0 || sc.gz != nil) {
		// Of spares of one size, one that fit its body goes first, one that did not last: lent first, the fit
		// ones serve the bodies of their size, and the others, lent only when no smaller spare is free, age out.
		i := sort.Search(len(b.free), func(i int) bool {
			c := cap(b.free[i].buf)
			return c > cap(sc.buf) || (fit && c == cap(sc.buf))
		})
		b.free = slices.Insert(b.free, i, sc)
	}
	return oversized
}

// parsed counts a body of n bytes read and parsed this cycle, for the next cycle's retain limit.
func (b *buffers) parsed(n int) {
	b.bodies.Add(1)
	b.bodyBytes.Add(int64(n))
}

// endCycle sets the retain limit by this cycle's mean body, and sizes the spares for the next cycle by this one's
// peak, dropping the smallest beyond it: a large one dropped would be grown again by the next large body, while the
// smaller ones left are lent to small bodies as readily. It drops too the spares lent this cycle that have held only
// bodies under half their size for spareIdleCycles cycles.
func (b *buffers) endCycle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.bodies.Swap(0); n > 0 {
		mean := b.bodyBytes.Swap(0) / n
		b.retain, b.mean = retainFor(mean), int(min(mean, 1<<37))
	}
	b.max = max(b.floor, b.peak)
	b.peak = b.out
	if drop := len(b.free) - b.max; drop > 0 {
		copy(b.free, b.free[drop:])
		clear(b.free[b.max:])
		b.free = b.free[:b.max]
	}
	b.free = slices.DeleteFunc(b.free, func(sc scratch) bool {
		return sc.lentAt == b.cycle && b.cycle-sc.fitAt >= spareIdleCycles
	})
	for i := range b.free {
		if b.free[i].lentAt != b.cycle {
			b.free[i].fitAt = b.cycle
		}
	}
	b.cycle++
}

// retainMin is the largest response buffer kept whatever the recent sizes: large enough for the response of a node
// at the kubelet's default maximum of 110 pods (BENCHMARKS.md, "Figures behind the comments").
const retainMin = 256 << 10

// retainFor is the largest buffer kept after a scrape, given the previous cycle's mean response: eight times it, so
// that buffers sized for the cluster's common nodes (a mix of 30- and 250-pod nodes included) stay and a scrape
// allocates nothing, while one grown for an outlier (up to the response cap) is given back after that scrape. What
// is kept is then bounded by a few times a cycle's bytes, not by workers x the cap.
func retainFor(meanBody int64) int {
	return max(retainMin, int(8*min(meanBody, 1<<37)))
}
