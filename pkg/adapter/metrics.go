package adapter

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	queriesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metrics_ring", Subsystem: "prometheus", Name: "queries_total",
		Help:           "Prometheus queries by query and outcome (success, error, timeout, panic).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"query", "outcome"})
	queryWarnings = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metrics_ring", Subsystem: "prometheus", Name: "query_warnings_total",
		Help:           "Warnings returned with Prometheus query results (e.g. partial responses).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"query"})
	queryDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "metrics_ring", Subsystem: "prometheus", Name: "query_duration_seconds",
		Help:           "Duration of each Prometheus query.",
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"query"})
	seriesSkipped = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metrics_ring", Subsystem: "prometheus", Name: "series_skipped_total",
		Help:           "Result series not served: missing naming labels (unmapped), naming an object twice (duplicate), or CPU without memory (partial).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	mappingPanics = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "metrics_ring", Subsystem: "prometheus", Name: "mapping_panics_total",
		Help:           "Polls whose results were lost to a panic while mapping them to samples (a bug; the log has its stack).",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(queriesTotal, queryWarnings, queryDuration, seriesSkipped, mappingPanics)
	})
}
