// Package adapter is the Prometheus source. Each Collect is one collection cycle, run by pkg/collect's loop within
// the adapter's Budget: it runs cluster-wide instant queries for container and node CPU, memory and swap against a
// Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics), decodes the results as a stream,
// maps their labels to nodes and containers, hands them to the cycle's Append as rate samples, and returns the
// cycle's outcome: a success when every CPU and memory query returned data. Its configuration is
// prometheus-adapter's resourceRules block, loaded unchanged, so an operator migrates by pointing metrics-ring at
// the file they already have.
//
// It owns the rules, the queries they render, the HTTP client and how results map to samples. It keeps no loop, no
// health and no say in which objects exist (storage takes the pods the informers bound); only failure streaks, for
// logging once per streak.
package adapter
