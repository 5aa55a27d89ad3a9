package scraper

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// maxWorkers bounds the scrape workers however large the cluster: each keeps a reusable batch, and borrows a
// response buffer while it reads a body.
const maxWorkers = 1000

// workersFor is how many nodes a cycle scrapes at once. A cycle has one deadline for every node (the loop's budget), so
// with a fixed number of workers the nodes at the end of a large cluster's cycle would fail every time once nodes x
// latency / workers passed it (BENCHMARKS.md, "Figures behind the comments"). So the floor (Options.Concurrency) grows
// to what the previous cycle's mean scrape latency says scrapes every node within half the budget, as metrics-server's
// goroutine per node would, but bounded.
func workersFor(nodes, floor int, meanScrape, budget time.Duration) int {
	w := floor
	if meanScrape > 0 && budget > 0 {
		need := int(math.Ceil(float64(nodes) * float64(meanScrape) / float64(budget/2)))
		w = max(w, min(need, maxWorkers))
	}
	return min(w, nodes)
}

// rampUp is how many workers to add, mid-cycle, when at the pace so far the nodes not yet started would not all
// start by target (half the budget): the first cycle has no latency to size from, and latency can jump (a
// cold start opens every connection at once: the first cycles of a large cluster failed many nodes with workers
// sized by the floor). Progress is counted in nodes handed to workers, which is the completion rate once
// every worker has had its first node.
func rampUp(workers, started, total int, elapsed, target time.Duration) int {
	left := total - started
	if left <= 0 || started <= 0 || elapsed <= 0 || workers >= maxWorkers {
		return 0
	}
	projected := time.Duration(float64(left) * float64(elapsed) / float64(started))
	remaining := target - elapsed
	if projected <= remaining {
		return 0
	}
	factor := 2.0 // past the target already: double, and look again at the next tick
	if remaining > 0 {
		factor = math.Max(float64(projected)/float64(remaining), 1.25)
	}
	want := min(int(math.Ceil(float64(workers)*factor)), maxWorkers, workers+left)
	return max(0, want-workers)
}

// crew is one cycle's scrape workers: the jobs they take (indexes into the cycle's nodes), each node's error, and
// the time spent scraping with the scrapes it covers: only those started before the deadline, since the rest fail
// at once and would make the nodes look faster than they are.
type crew struct {
	s               *Scraper
	ctx             context.Context
	nodes           []*corev1.Node
	states          []*nodeState
	add             storage.AppendFunc
	jobs            chan int
	errs            []error
	wg              sync.WaitGroup
	size            int
	scraping, timed atomic.Int64
}

// grow starts n more workers, reusing the scraper's (their buffers and batches) before making new ones.
func (c *crew) grow(n int) {
	s := c.s
	for len(s.workers) < c.size+n {
		s.workers = append(s.workers, &worker{})
	}
	for _, w := range s.workers[c.size : c.size+n] {
		c.wg.Go(func() {
			for i := range c.jobs {
				t, late := time.Now(), c.ctx.Err() != nil
				c.errs[i] = s.work(c.ctx, w, c.nodes[i], c.states[i], c.add)
				if !late {
					c.scraping.Add(int64(time.Since(t)))
					c.timed.Add(1)
				}
			}
		})
	}
	c.size += n
}

// dispatch scrapes the nodes with workers sized for the budget (workersFor), adds workers mid-cycle when the pace
// so far would not start every node within half the budget (rampUp), and returns each node's error and how many
// workers ran. The mean scrape time it measured sizes the next cycle's workers, and the workers it ran are the ones
// kept for it.
func (s *Scraper) dispatch(ctx context.Context, nodes []*corev1.Node, states []*nodeState, add storage.AppendFunc,
	budget time.Duration, start time.Time) (errs []error, workers int) {
	c := &crew{s: s, ctx: ctx, nodes: nodes, states: states, add: add, jobs: make(chan int),
		errs: make([]error, len(nodes))}
	dispatched := false
	defer func() {
		if !dispatched { // a panic handing out the work: the workers finish theirs and none waits for more
			close(c.jobs)
			c.wg.Wait()
		}
	}()
	c.grow(workersFor(len(nodes), s.opts.Concurrency, s.meanScrape, budget))
	tick := time.NewTicker(max(budget/20, 10*time.Millisecond))
	for i := 0; i < len(nodes); {
		select {
		case c.jobs <- i:
			i++
		case <-tick.C:
			if n := rampUp(c.size, i, len(nodes), time.Since(start), budget/2); n > 0 {
				klog.V(2).InfoS("Adding scrape workers mid-cycle", "workers", c.size, "adding", n, "started", i,
					"nodes", len(nodes), "elapsed", time.Since(start))
				c.grow(n)
			}
		}
	}
	tick.Stop()
	dispatched = true
	close(c.jobs)
	c.wg.Wait()
	if n := c.timed.Load(); n > 0 {
		s.meanScrape = time.Duration(c.scraping.Load() / n)
	}
	// The workers kept for the next cycle are the ones this cycle ran (at least the floor, which a cycle of a few
	// nodes, a Retry, does not run), like the spare buffers (buffers.endCycle): workers added for a slow cycle (a
	// loaded machine, a cold start), each with a batch sized by the largest response it parsed and holding that
	// response's names, go once a cycle runs with fewer. Kept for good, they made the process' memory follow the
	// slowest cycle it ever had.
	keep := max(c.size, min(s.opts.Concurrency, len(s.workers)))
	clear(s.workers[keep:])
	s.workers = s.workers[:keep]
	return c.errs, c.size
}
