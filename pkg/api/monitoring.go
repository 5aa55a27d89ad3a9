package api

import (
	"context"
	"sync"
	"time"

	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricFreshness is the age of the values served (a shared list's once, when built), so an operator sees when answers go stale before users do.
// Request latency and counts need nothing here: the generic server's apiserver_request_duration_seconds and
// apiserver_request_total already have them, by version. The API's own request metrics have a `version` label too
// (v1 or v1beta1, the version the request used); freshness has none, as the versions share one build.
var metricFreshness = metrics.NewHistogram(&metrics.HistogramOpts{
	Namespace:      "metrics_ring",
	Subsystem:      "api",
	Name:           "metric_freshness_seconds",
	Help:           "Age of the node and pod metrics served to readers: request time minus the sample timestamp, so it includes the time since the collection was published. A list shared by the requests of one collection is observed once, when it is built. Collection's own lag is metrics_ring_storage_freshness_seconds.",
	Buckets:        metrics.ExponentialBuckets(1, 1.364, 20),
	StabilityLevel: metrics.ALPHA,
})

var (
	watchesActive = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "watches",
		Help:           "Watches open on NodeMetrics and PodMetrics, by API version.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"version"})
	watchesRejected = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "watches_rejected_total",
		Help:           "Watches refused with 429, by the limit reached: total (--max-watches) or user (--max-watches-per-user), and API version.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"limit", "version"})
	watchesFellBehind = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "watches_fell_behind_total",
		Help:           "Watches ended with 410 Gone because their client read more than 4 collections behind, by API version.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"version"})
	watchesOverBudget = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "watches_over_budget_total",
		Help:           "Watches ended with 410 Gone because what their user's watches and builds keep was over its share of --reader-cache-bytes, by API version.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"version"})
	watchPanics = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "watch_panics_total",
		Help:           "Panics in a watch or watch feed goroutine, contained: the watches end with an ERROR event.",
		StabilityLevel: metrics.ALPHA,
	})
	buildsMade = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "builds_total",
		Help:           "Selections built from a snapshot; every list, page and watch of one selection and collection shares one.",
		StabilityLevel: metrics.ALPHA,
	})
	listEncodings = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "list_encodings_total",
		Help:           "Encodings of kept lists made, by how: direct (compact JSON written directly from the selection, the encoder's first list having compared equal) or encoder (made by the apiserver's encoder: protobuf, YAML, pretty JSON, an encoder's first list, or JSON found to differ, which is logged).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"by"})
	pagesContinuedFromNewest = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "continued_from_newest_total",
		Help:           "Pages of a paged list continued after their token's key from the newest committed snapshot, by reason: foreign (the token is another replica's or an earlier run's) or expired (its snapshot is no longer kept).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	buildsEvicted = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "builds_evicted_total",
		Help:           "Builds and watch feeds let go before their snapshot was, to keep what readers' builds keep within its budget in bytes (--reader-cache-bytes).",
		StabilityLevel: metrics.ALPHA,
	})
	buildsKeptBytes = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "builds_kept_bytes",
		Help:           "Estimated bytes that readers' builds keep between requests (entries, shared lists and pages, encodings), bounded by --reader-cache-bytes.",
		StabilityLevel: metrics.ALPHA,
	})
	answersInFlightBytes = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "answers_in_flight_bytes",
		Help:           "Estimated bytes of the large answers nothing keeps (lists, pages and tables made for one request) being made and written, bounded by --answer-bytes.",
		StabilityLevel: metrics.ALPHA,
	})
	answersWaiting = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "answers_waiting",
		Help:           "Requests waiting for room in --answer-bytes for their answer, holding none of it meanwhile.",
		StabilityLevel: metrics.ALPHA,
	})
	answersRejected = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "answers_rejected_total",
		Help:           "Requests answered 429 because --answer-bytes (or their user's quarter of it) had no room for their answer for as long as they could wait, or their user had too many requests waiting for room already, by API version.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"version"})
	buildsRejected = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "metrics_ring",
		Subsystem:      "api",
		Name:           "builds_rejected_total",
		Help:           "Requests answered 429 because every build slot stayed busy for as long as they could wait, or their user already had too many lists waiting, by API version.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"version"})
)

var registerOnce sync.Once

// registerMetrics registers the API's metrics in the legacy registry served on /metrics. Safe to call many times.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(metricFreshness, watchesActive, watchesRejected, watchesFellBehind, watchesOverBudget,
			watchPanics,
			buildsMade, buildsEvicted, buildsKeptBytes, buildsRejected, pagesContinuedFromNewest, listEncodings,
			answersInFlightBytes, answersWaiting, answersRejected)
	})
}

// requestVersion is the API version a request used, the `version` label of the request metrics; "" for a call
// that did not come through the handlers.
func requestVersion(ctx context.Context) string {
	if info, ok := genericapirequest.RequestInfoFrom(ctx); ok && info != nil {
		return info.APIVersion
	}
	return ""
}

func observeFreshness(now, sampled time.Time) {
	metricFreshness.Observe(now.Sub(sampled).Seconds())
}
