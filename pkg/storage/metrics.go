package storage

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	samplesRejected = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "storage",
		Name:           "samples_rejected_total",
		Help:           "Samples not served because a value was invalid (NaN, infinite, negative, a time out of range) or zero (a broken source), above what the node can do (implausible), the pod is bound to another node (foreign), or the sample is of a predecessor of the pod under its name (predecessor: stamped, or of a container started, before the pod was created); invalid_swap and invalid_start count samples served without their invalid swap value or start time.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	seriesPruned = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "storage",
		Name:           "series_pruned_total",
		Help:           "Series dropped from storage because their object was deleted or they went stale.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	seriesGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "storage",
		Name:           "objects",
		Help:           "Nodes and pods with samples in storage.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	freshness = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "storage",
		Name:           "freshness_seconds",
		Help:           "Age of each servable node's newest sample at each collection's publication (the source's sample time to publication; nodes only): how far collection lags behind the nodes, read or not. What readers get is metrics_ring_api_metric_freshness_seconds.",
		Buckets:        []float64{0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120},
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// registerMetrics adds storage's metrics to the component-base legacy registry served on /metrics.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(samplesRejected, seriesPruned, seriesGauge, freshness)
	})
}
