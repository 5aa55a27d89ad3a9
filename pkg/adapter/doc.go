// Package adapter is the Prometheus source: every resolution it runs cluster-wide instant queries for container and
// node CPU and memory against a Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics) and
// writes the results into storage as rate samples. Its configuration is prometheus-adapter's resourceRules block,
// loaded unchanged, so an operator migrates by pointing metrics-ring at the file they already have.
package adapter
