package scraper

import (
	"context"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// guarded is collect, whose panic outside any one node's scrape (listing the nodes, handing out the work,
// summing up) loses that cycle, not the process (DESIGN.md section 3): an error, counted, and logged with its
// stack once per streak. A node's own scrape has its own recover (work).
func (s *Scraper) guarded(ctx context.Context, add storage.AppendFunc, unreached bool) (o storage.Outcome) {
	defer func() {
		r := recover()
		began := s.panicking.Set(r != nil) == logonly.Began
		if r == nil {
			return
		}
		err := logonly.Recovered(r, "kubelet source: collection cycle")
		cyclePanics.Inc()
		if began {
			klog.ErrorS(err, "Collection cycle lost; will log again after a cycle that does not panic", logonly.KV(err)...)
		}
		o = storage.Outcome{Err: err}
	}()
	return s.collect(ctx, add, unreached)
}

// work is a worker's job for one node: scrape it, losing only that node's scrape to a panic (DESIGN.md section 3),
// and give back the buffers a large response grew.
func (s *Scraper) work(ctx context.Context, w *worker, node *corev1.Node, st *nodeState, add storage.AppendFunc) (err error) {
	defer func() {
		// A failed fetch, or a panic, may still hold what it borrowed (a gzip reader is Reset before each use, a
		// buffer overwritten, so a panic's are fit to lend again).
		s.release(w)
		if r := recover(); r != nil {
			err = logonly.Recovered(r, fmt.Sprintf("node %q: scrape", node.Name))
			// The worker's and the node's parsing state may be half-written: both start afresh.
			*w = worker{}
			st.parser = newParser()
			s.failed(node.Name, st, err)
		}
		if w.oversized {
			w.batch, w.oversized = storage.Batch{}, false
		}
	}()
	return s.scrape(ctx, w, node, st, add)
}

// release gives the worker's body buffer and gzip reader back to the spares once the body is parsed: the batch
// holds the parser's interned names, never bytes of the body, so storing it (which may wait on storage's lock
// while a snapshot is built) needs neither. A buffer grown beyond the retain limit is dropped instead, and the
// batch, whose slices grew with that response, after it is stored.
func (s *Scraper) release(w *worker) {
	if cap(w.buf) > s.retain {
		w.buf, w.oversized = nil, true
	}
	if w.readers.borrowed { // a worker that borrowed nothing gives back nothing
		s.client.spare.put(w.buf, w.readers.gz)
		w.buf, w.readers.gz, w.readers.borrowed = nil, nil, false
	}
}

// retainMin is the largest response buffer a worker keeps whatever the recent sizes: a 110-pod node's response
// (133 KB) grows one to 256 KiB.
const retainMin = 256 << 10

// retainFor is the largest buffer a worker keeps after a scrape, given the previous cycle's mean response: eight
// times it, so that buffers sized for the cluster's common nodes (a mix of 30- and 250-pod nodes included) stay
// and a scrape allocates nothing, while one grown for an outlier (up to the response cap) is given back after that
// scrape. What workers keep is then bounded by a few times a cycle's bytes, not by workers x the cap.
func retainFor(meanBody int64) int {
	return max(retainMin, int(8*min(meanBody, 1<<37)))
}

// scratchPool holds the response buffers and gzip readers that workers borrow while they read and parse a body, and
// give back as soon as it is parsed. Workers wait for the kubelet most of a scrape, and a large cluster's cycle runs up
// to maxWorkers of them at once (pace.go): when each kept its own, their buffers were held between cycles and all
// touched in every cycle. Now what is kept follows the scrapes that read a body at the same time: the most that were
// out at once in the previous cycle (at least floor). A fixed cap of floor made every scrape beyond the floor at once
// allocate both anew, a large part of the process' CPU in garbage collection (BENCHMARKS.md, "Figures behind the
// comments").
type scratchPool struct {
	mu    sync.Mutex
	floor int
	max   int // spares kept: max(floor, the previous cycle's peak)
	free  []scratch
	// out counts what workers borrowed (from the spares or new) and have not given back; peak is its most since
	// the previous endCycle.
	out, peak int
}

type scratch struct {
	buf []byte
	gz  *gzip.Reader
}

func newScratchPool(floor int) scratchPool { return scratchPool{floor: floor, max: floor} }

// get returns a spare buffer and gzip reader, or nothing (the caller allocates on demand); either way the caller
// has borrowed one, which put gives back.
func (p *scratchPool) get() ([]byte, *gzip.Reader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out++
	p.peak = max(p.peak, p.out)
	n := len(p.free)
	if n == 0 {
		return nil, nil
	}
	sc := p.free[n-1]
	p.free[n-1] = scratch{}
	p.free = p.free[:n-1]
	return sc.buf[:0], sc.gz
}

// put takes back what get lent (buf may have grown, or be nil when it grew too large to keep), keeping at most max
// spares.
func (p *scratchPool) put(buf []byte, gz *gzip.Reader) {
	sc := scratch{buf: buf, gz: gz}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out--
	if len(p.free) < p.max && (cap(sc.buf) > 0 || sc.gz != nil) {
		p.free = append(p.free, sc)
	}
}

// endCycle sizes the spares for the next cycle by this one's peak, dropping any beyond it.
func (p *scratchPool) endCycle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.max = max(p.floor, p.peak)
	p.peak = p.out
	if len(p.free) > p.max {
		clear(p.free[p.max:])
		p.free = p.free[:p.max]
	}
}
