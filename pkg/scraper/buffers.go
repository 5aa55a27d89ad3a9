package scraper

import (
	"cmp"
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
// while the spares' count allowed, though, they came to number the most large bodies ever read at once, a rise
// through every hour measured (BENCHMARKS.md, "Figures behind the comments"): so a spare that has held no body of
// its size (over half its capacity) for spareUnneededCycles cycles running, lent or not, gives up its buffer and
// keeps its gzip reader; the next body it is lent sizes it anew.
type buffers struct {
	mu    sync.Mutex
	floor int
	max   int       // spares kept: max(floor, the previous cycle's peak)
	free  []scratch // in the order lend looks through them (lendOrder): by capacity, smallest first
	// out counts what workers borrowed (from the spares or new) and have not given back; peak is its most since
	// the previous endCycle.
	out, peak int
	// retain is the largest buffer kept (retainFor the previous cycle's mean body), and mean that body: what a
	// node not read before is expected to send.
	retain, mean int
	// Bodies parsed this cycle and their bytes, for the next cycle's retain.
	bodies, bodyBytes atomic.Int64
}

// scratch is one spare: a body buffer and a gzip reader, lent together, and how long the buffer went unneeded.
type scratch struct {
	buf []byte
	gz  *gzip.Reader
	spareUse
}

// spareUse says whether a spare's buffer is still needed at its size; the borrower carries it back to giveBack.
type spareUse struct {
	needed   bool   // it held a body over half its capacity this cycle
	unneeded uint32 // the cycles running, before this one, in which it held none
}

// spareUnneededCycles is how many cycles running a spare's buffer may hold no body of its size before it goes: 5
// minutes at the default 15 s resolution, long enough that the spares of bursts that recur stay, short enough that
// one burst does not size them for good.
const spareUnneededCycles = 20

// newBuffers keeps at least floor spares (--kubelet-concurrency).
func newBuffers(floor int) *buffers {
	return &buffers{floor: floor, max: floor, retain: retainFor(0)}
}

// lend returns the smallest spare that holds a body of want bytes (the node's previous; 0 for the previous cycle's
// mean), or the largest spare when none does, or an empty scratch (the caller allocates on demand); either way the
// caller has borrowed one, which giveBack takes back. Of spares of one size, the one needed most recently is lent
// first, so that the others go unneeded and their buffers go.
func (b *buffers) lend(want int) scratch {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out++
	b.peak = max(b.peak, b.out)
	n := len(b.free)
	if n == 0 {
		return scratch{}
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
	sc.buf = sc.buf[:0]
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
	// The 2 bytes readCapped needs beyond the body: a buffer it has just doubled for the body counts as needed.
	if len(sc.buf)+2 > cap(sc.buf)/2 && cap(sc.buf) > 0 {
		sc.needed = true
	}
	b.out--
	if len(b.free) < b.max && (cap(sc.buf) > 0 || sc.gz != nil) {
		b.free = slices.Insert(b.free, sort.Search(len(b.free), func(i int) bool { return lendOrder(sc, b.free[i]) < 0 }), sc)
	}
	return oversized
}

// lendOrder orders the spares as lend looks through them: by capacity, then the most recently needed first.
func lendOrder(a, b scratch) int {
	if c := cmp.Compare(cap(a.buf), cap(b.buf)); c != 0 {
		return c
	}
	if c := cmp.Compare(a.unneeded, b.unneeded); c != 0 {
		return c
	}
	switch {
	case a.needed == b.needed:
		return 0
	case a.needed:
		return -1
	default:
		return 1
	}
}

// parsed counts a body of n bytes read and parsed this cycle, for the next cycle's retain limit.
func (b *buffers) parsed(n int) {
	b.bodies.Add(1)
	b.bodyBytes.Add(int64(n))
}

// endCycle sets the retain limit by this cycle's mean body, and sizes the spares for the next cycle by this one's
// peak, dropping the smallest beyond it: a large one dropped would be grown again by the next large body, while the
// smaller ones left are lent to small bodies as readily. A spare whose buffer has gone unneeded for
// spareUnneededCycles cycles gives it up.
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
	for i := range b.free {
		sc := &b.free[i]
		if sc.needed {
			sc.unneeded = 0
		} else {
			sc.unneeded++
		}
		sc.needed = false
		if sc.unneeded >= spareUnneededCycles {
			sc.buf, sc.unneeded = nil, 0
		}
	}
	b.free = slices.DeleteFunc(b.free, func(sc scratch) bool { return sc.buf == nil && sc.gz == nil })
	slices.SortStableFunc(b.free, lendOrder)
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
