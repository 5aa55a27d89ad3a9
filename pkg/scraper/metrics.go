package scraper

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Request outcomes of metrics_ring_kubelet_requests_total.
const (
	outcomeSuccess = "success"
	outcomeTimeout = "timeout"
	outcomeError   = "error"
	outcomePanic   = "panic" // a bug: the scrape or parse of one node panicked, and only that node's scrape is lost
)

var (
	scrapeDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "metrics_ring", Subsystem: "kubelet", Name: "scrape_duration_seconds",
		Help:           "Duration of one node's scrape (request, read and parse) in seconds.",
		Buckets:        metrics.ExponentialBuckets(0.005, 2, 12),
		StabilityLevel: metrics.ALPHA,
	})
	requestsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metrics_ring", Subsystem: "kubelet", Name: "requests_total",
		Help:           "Scrapes of kubelets by outcome (success, timeout, error, panic).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	// Only what the parser loses: samples storage rejects (invalid, zero, invalid swap, foreign) are counted once,
	// by storage, in metrics_ring_storage_samples_rejected_total.
	invalidSamples = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metrics_ring", Subsystem: "kubelet", Name: "invalid_samples_total",
		Help: "Lines and samples of kubelet responses lost before storage, by reason: parse_error, truncated, " +
			"duplicate, missing_labels, incomplete_container, incomplete_node, invalid_start_time (served with an " +
			"unknown start). Values storage rejects are in metrics_ring_storage_samples_rejected_total.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	// nodeUp is the only per-node series; it is deleted when the node leaves the lister (DESIGN.md section 2).
	nodeUp = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "metrics_ring", Subsystem: "kubelet", Name: "node_up",
		Help:           "1 when the newest scrape of the node's kubelet succeeded, else 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"node"})
	cyclePanics = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "metrics_ring", Subsystem: "kubelet", Name: "cycle_panics_total",
		Help:           "Collection cycles lost to a panic outside any one node's scrape (a bug; the log has its stack).",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// registerMetrics registers the scraper's metrics in the component-base legacy registry. It is safe to call more
// than once; New calls it.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(scrapeDuration, requestsTotal, invalidSamples, nodeUp, cyclePanics)
	})
}

// countInvalid adds what a response lost in parsing to invalid_samples_total.
func countInvalid(s *parseStats) {
	add := func(reason string, n int) {
		if n > 0 {
			invalidSamples.WithLabelValues(reason).Add(float64(n))
		}
	}
	add("parse_error", s.BadLines)
	add("truncated", b2i(s.Truncated))
	add("duplicate", s.Duplicates)
	add("missing_labels", s.MissingLabels)
	add("incomplete_container", s.Incomplete)
	add("incomplete_node", b2i(s.NodeMissing))
	add("invalid_start_time", s.BadStartTime)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
