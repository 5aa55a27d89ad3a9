package scraper

import (
	"context"
	"fmt"

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
