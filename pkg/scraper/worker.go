package scraper

import (
	"context"
	"fmt"

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

// release gives the worker's body buffer and gzip reader back to the Scraper's buffers once the body is parsed (or
// the scrape failed): storing the batch, which may wait on storage's lock while a snapshot is built, needs neither.
// A buffer grown beyond what the buffers keep is dropped, and the batch, whose slices grew with that response,
// after it is stored.
func (s *Scraper) release(w *worker) {
	if !w.readers.borrowed { // a worker that borrowed nothing gives back nothing
		return
	}
	w.oversized = s.buffers.giveBack(scratch{buf: w.buf, gz: w.readers.gz, spareUse: w.readers.use})
	w.buf, w.readers.gz, w.readers.use, w.readers.borrowed = nil, nil, spareUse{}, false
}
