package api

import (
	"sort"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// splitCycle is a collection cycle whose pods land in two halves, the first published before the cycle commits
// (storage's Cycle.Publish, as in a cycle longer than a second), then published is called with how many pods the
// publication changed (a watch feed takes the newest snapshot only, so a test waits for it before the commit).
func (c *cluster) splitCycle(podCPU map[string]float64, published func(pods int)) {
	keys := make([]string, 0, len(podCPU))
	for k := range podCPU {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	now := time.Unix(0, c.clock.Add(int64(15*time.Second)))
	cy := c.store.BeginCycle()
	for i, half := range [][]string{keys[:len(keys)/2], keys[len(keys)/2:]} {
		b := &storage.Batch{CPU: storage.CPURate, Window: time.Minute}
		for _, key := range half {
			ns, name := splitKey(key)
			b.Containers = append(b.Containers, storage.ContainerSample{Namespace: ns, Pod: name, Container: "app",
				Sample: storage.Sample{Timestamp: now, CPU: podCPU[key], Memory: 1 << 20}})
		}
		cy.Append(b)
		if i == 0 {
			c.clock.Add(int64(storage.MinPublishInterval))
			cy.Publish()
			published(len(half))
		}
	}
	cy.Commit(storage.Outcome{Success: true})
}

// TestSlowWatcherLagCountsCycles: a watcher's lag is counted in collection cycles, not in deliveries, so the interim
// publications of long cycles do not end a slow watcher sooner; it is ended once maxWatchLag cycles behind.
func TestSlowWatcherLagCountsCycles(t *testing.T) {
	c, cpu, slow, fast, before := slowAndFast(t)
	collect := func(i int) {
		for k := range cpu {
			cpu[k] = 0.1 + float64(i%2)*0.1
		}
		// Two deliveries, each queued to slow as well once fast has its events.
		c.splitCycle(cpu, func(pods int) { events(t, fast, pods) })
		events(t, fast, len(cpu)-len(cpu)/2)
	}
	for i := 1; i < maxWatchLag; i++ {
		collect(i)
	}
	if after, _ := testutil.GetCounterMetricValue(watchesFellBehind.WithLabelValues("")); after != before {
		t.Fatalf("the slow watcher was ended %d cycles behind (%d deliveries), want %d cycles", maxWatchLag-1,
			2*(maxWatchLag-1), maxWatchLag)
	}
	collect(maxWatchLag)
	endedGone(t, slow, len(cpu), before)
}
