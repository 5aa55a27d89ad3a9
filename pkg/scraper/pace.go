package scraper

import (
	"math"
	"time"
)

// maxWorkers bounds the scrape workers however large the cluster: each keeps a reusable response buffer and batch.
const maxWorkers = 1000

// workersFor is how many nodes a cycle scrapes at once. A cycle has one deadline for every node (the request
// timeout, or the resolution when shorter), so with a fixed number of workers the nodes at the end of a large
// cluster's cycle would fail every time once nodes x latency / workers passed it: at 10,000 nodes, 50 workers and
// 55 ms per scrape a cycle already took 11 s of a 10 s budget's worth. So the floor (Options.Concurrency) grows
// to what the previous cycle's mean scrape latency says scrapes every node within half the budget, as
// metrics-server's goroutine per node would, but bounded.
func workersFor(nodes, floor int, meanScrape, budget time.Duration) int {
	w := floor
	if meanScrape > 0 && budget > 0 {
		need := int(math.Ceil(float64(nodes) * float64(meanScrape) / float64(budget/2)))
		w = max(w, min(need, maxWorkers))
	}
	return min(w, nodes)
}
