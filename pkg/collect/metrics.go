package collect

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	durationsMu sync.Mutex
	durations   = map[string]*metrics.Histogram{}
)

// durationOf returns the collection duration histogram of a source, registering it on first use. Its name keeps
// the one each source had when it ran its own loop (metrics_ring_kubelet_collection_duration_seconds,
// metrics_ring_prometheus_collection_duration_seconds), so dashboards keep working; a process registers only its
// own source's. The buckets (5 ms to 41 s) hold the boundaries of both former histograms.
func durationOf(source string) *metrics.Histogram {
	durationsMu.Lock()
	defer durationsMu.Unlock()
	if h, ok := durations[source]; ok {
		return h
	}
	h := metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "metrics_ring", Subsystem: source, Name: "collection_duration_seconds",
		Help:           "Duration of one collection cycle of the " + source + " source (every selected node, or every query), in seconds.",
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})
	legacyregistry.MustRegister(h)
	durations[source] = h
	return h
}
