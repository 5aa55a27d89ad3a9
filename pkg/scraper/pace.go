package scraper

import (
	"math"
	"time"
)

// maxWorkers bounds the scrape workers however large the cluster: each keeps a reusable response buffer and batch.
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
