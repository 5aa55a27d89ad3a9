package scraper

import (
	"context"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"

	corev1 "k8s.io/api/core/v1"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// work is a worker's job for one node: scrape it, losing only that node's scrape to a panic (DESIGN.md section 3),
// and give back the buffers a large response grew.
func (s *Scraper) work(ctx context.Context, w *worker, node *corev1.Node, st *nodeState, add storage.AppendFunc) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = logonly.Recovered(r, fmt.Sprintf("node %q: scrape", node.Name))
			// The worker's and the node's parsing state may be half-written: both start afresh.
			*w = worker{}
			st.parser = newParser()
			s.failed(node.Name, st, err)
		}
		if err == nil {
			s.bodies.Add(1)
			s.bodyBytes.Add(int64(len(w.buf)))
		}
		w.giveBack(s.retain)
		s.client.spare.put(w)
	}()
	return s.scrape(ctx, w, node, st, add)
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

// giveBack drops the worker's buffers when the last response grew its body buffer beyond limit: the batch too,
// whose slices grew with the response's containers.
func (w *worker) giveBack(limit int) {
	if cap(w.buf) > limit {
		w.buf, w.batch = nil, storage.Batch{}
	}
}

// scratchPool holds the response buffers and gzip readers (about 110 KB together for a 30-pod node) that workers
// borrow while they read and parse a body, and give back after each scrape. Workers wait for the kubelet most of
// a scrape, and a large cluster's cycle runs up to maxWorkers of them at once (pace.go): when each kept its own,
// 1,000 workers held about 118 MB between cycles (12 KB a node at 10,000 nodes, twice the 1,000-node share), and
// all of it was touched in every cycle. Now what is kept follows the scrapes that read a body at the same time,
// and at most max are kept.
type scratchPool struct {
	mu   sync.Mutex
	max  int
	free []scratch
}

type scratch struct {
	buf []byte
	gz  *gzip.Reader
}

// get returns a spare buffer and gzip reader, or nothing (the caller allocates on demand).
func (p *scratchPool) get() ([]byte, *gzip.Reader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free)
	if n == 0 {
		return nil, nil
	}
	sc := p.free[n-1]
	p.free[n-1] = scratch{}
	p.free = p.free[:n-1]
	return sc.buf[:0], sc.gz
}

// put takes w's buffer and gzip reader back (giveBack has dropped an outlier's already), keeping at most max.
func (p *scratchPool) put(w *worker) {
	sc := scratch{buf: w.buf, gz: w.readers.gz}
	w.buf, w.readers.gz = nil, nil
	if cap(sc.buf) == 0 && sc.gz == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) < p.max {
		p.free = append(p.free, sc)
	}
}
