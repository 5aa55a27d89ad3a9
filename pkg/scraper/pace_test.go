package scraper

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestWorkersFor(t *testing.T) {
	for _, tc := range []struct {
		name         string
		nodes, floor int
		mean, budget time.Duration
		want         int
	}{
		{"first cycle: the floor", 10000, 50, 0, 10 * time.Second, 50},
		{"small cluster: never more than nodes", 3, 50, time.Second, 10 * time.Second, 3},
		{"fast kubelets: the floor is enough", 1000, 50, 10 * time.Millisecond, 10 * time.Second, 50},
		{"10,000 nodes at 55 ms: scraped in half of 10 s", 10000, 50, 55 * time.Millisecond, 10 * time.Second, 110},
		{"bounded however slow", 100000, 50, time.Second, time.Second, maxWorkers},
		{"no nodes", 0, 50, time.Second, time.Second, 0},
	} {
		if got := workersFor(tc.nodes, tc.floor, tc.mean, tc.budget); got != tc.want {
			t.Errorf("%s: %d workers, want %d", tc.name, got, tc.want)
		}
	}
}

// TestSlowKubeletsGetMoreWorkers: with too few workers for the cluster's latency, the first cycle would not reach
// every node before its deadline; workers are added within it as soon as its pace shows it, and the next cycles
// start with enough, sized from the latency measured. Time is fake (testing/synctest): the kubelets' 100 ms and the
// 2 s budget are exact whatever the machine's load, so every cycle must reach every node.
func TestSlowKubeletsGetMoreWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slow atomic.Bool
		slow.Store(true)
		s, store, _ := pacedScraper(t, &slow)
		defer closeIdle(t, s.Scraper)
		// One worker, 60 nodes of 100 ms: 6 s of scraping in a row, over the 2 s budget.
		start := time.Now()
		s.collect(context.Background())
		if end := store.lastEnd(t); end.err != nil {
			t.Fatalf("first cycle: %v (workers %d)", end.err, len(s.workers))
		}
		if len(s.workers) < 4 {
			t.Fatalf("60 nodes of 100 ms in 2 s with %d workers: impossible, the test is broken", len(s.workers))
		}
		if took := time.Since(start); took >= 2*time.Second {
			t.Fatalf("first cycle took %v of its 2 s budget", took)
		}
		// The next cycles start with the workers the measured latency asks for: every node within half the budget.
		for cycle := 2; cycle <= 3; cycle++ {
			start := time.Now()
			s.collect(context.Background())
			if end := store.lastEnd(t); end.err != nil {
				t.Fatalf("cycle %d: %v (workers %d, mean scrape %v)", cycle, end.err, len(s.workers), s.meanScrape)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("cycle %d took %v with %d workers (mean scrape %v), want within half the 2 s budget", cycle,
					took, len(s.workers), s.meanScrape)
			}
		}
	})
}

func TestRampUp(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		workers, started, total int
		elapsed, target         time.Duration
		want                    int
	}{
		{"on pace", 10, 50, 100, time.Second, 3 * time.Second, 0},
		{"twice too slow", 10, 20, 100, time.Second, 3 * time.Second, 10}, // 4 s projected for 2 s left
		{"past the target doubles", 10, 20, 100, 4 * time.Second, 3 * time.Second, 10},
		{"at most one worker per node left", 10, 20, 25, 4 * time.Second, 3 * time.Second, 5},
		{"never past maxWorkers", maxWorkers - 3, 10, 100000, time.Second, 2 * time.Second, 3},
		{"nothing started yet: no pace to judge", 10, 0, 100, time.Second, 3 * time.Second, 0},
		{"everything started", 10, 100, 100, time.Second, 3 * time.Second, 0},
		{"slightly slow still adds a quarter", 100, 500, 1000, time.Second, 1990 * time.Millisecond, 25},
	} {
		if got := rampUp(tc.workers, tc.started, tc.total, tc.elapsed, tc.target); got != tc.want {
			t.Errorf("%s: rampUp = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// pacedScraper is a scraper with a floor of one worker and a 2 s budget over 60 kubelets that answer after 100 ms
// while slow holds, at once otherwise. Call it inside a synctest bubble, and closeIdle its Scraper when done.
func pacedScraper(t *testing.T, slow *atomic.Bool) (*testScraper, *fakeStore, *fakeLister) {
	t.Helper()
	var n atomic.Int64
	kubelet := func(w http.ResponseWriter, _ *http.Request) {
		if slow.Load() {
			time.Sleep(100 * time.Millisecond)
		}
		ms, cpu := time.Now().UnixMilli(), float64(n.Add(1))
		fmt.Fprintf(w, "# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total %g %d\n", cpu, ms)
		fmt.Fprintf(w, "# TYPE node_memory_working_set_bytes gauge\nnode_memory_working_set_bytes 1e9 %d\n", ms)
	}
	pn := newPipeNet()
	var nodes []*corev1.Node
	for i := range 60 {
		nodes = append(nodes, nodeFor(t, fmt.Sprintf("node-%d", i), pn.kubelet(t, kubelet)))
	}
	store, lister := newFakeStore(), &fakeLister{nodes: nodes}
	s, err := newScraper(pn.options(Options{InsecureTLS: true, UseNodeStatusPort: true, Concurrency: 1,
		Timeout: 2 * time.Second}), lister, store)
	if err != nil {
		t.Fatal(err)
	}
	return s, store, lister
}

// TestWorkersFollowTheCycle: workers added for a slow cycle (100 ms kubelets, one worker's floor) are let go, with
// the batches they hold, once the kubelets answer at once and a cycle runs with the floor: the scraper's memory
// follows its latest cycle, not the slowest it ever had, and never drops below the floor.
func TestWorkersFollowTheCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slow atomic.Bool
		slow.Store(true)
		s, store, lister := pacedScraper(t, &slow)
		defer closeIdle(t, s.Scraper)
		s.collect(context.Background())
		if end := store.lastEnd(t); end.err != nil || len(s.workers) < 4 {
			t.Fatalf("slow cycle: %v with %d workers, want no error and at least 4 (60 nodes of 100 ms in 2 s)",
				end.err, len(s.workers))
		}
		slow.Store(false)
		// The next cycle still runs the workers the slow one's latency asks for; the one after, the floor.
		for range 2 {
			s.collect(context.Background())
			if end := store.lastEnd(t); end.err != nil {
				t.Fatalf("quick cycle: %v", end.err)
			}
		}
		if len(s.workers) != 1 {
			t.Errorf("after a cycle of kubelets that answer at once, %d workers kept, want the floor's 1", len(s.workers))
		}
		for i, w := range s.workers[:cap(s.workers)][len(s.workers):] {
			if w != nil {
				t.Fatalf("worker %d let go but still referenced by the scraper's array, with its batch", len(s.workers)+i)
			}
		}
		// A cycle that runs no worker (no node listed, or a Retry with nothing to retry) keeps the floor's.
		lister.mu.Lock()
		lister.nodes = nil
		lister.mu.Unlock()
		s.collect(context.Background())
		if len(s.workers) != 1 {
			t.Errorf("after a cycle of no node, %d workers kept, want the floor's 1", len(s.workers))
		}
	})
}
