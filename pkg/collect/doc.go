// Package collect owns the collection cycle (DESIGN.md section 1): one loop, Loop, that every resolution begins a
// cycle in storage, gives the source a deadline (the source's Budget) and the cycle's Append, and commits the
// outcome the source returns, which storage records as the source's health (last success, last error) and
// publishes with a new snapshot; while the source collects, the loop asks storage every second to publish what has
// landed (Cycle.Publish). Cycles never overlap: one that overruns the resolution delays the next.
//
// A source (pkg/scraper for kubelets, pkg/adapter for Prometheus) fetches and parses only: it keeps no loop, no
// health and no knowledge of storage beyond the types of a batch. The loop times each cycle in
// metrics_ring_<source>_collection_duration_seconds. cmd builds one source and one loop, warms the kubelet source
// once the nodes are known (Warm: collections, in rounds until the pods are known, so the first cycle runs on open
// connections and appends the newest batch of each node the warm-up kept), and runs the loop once the informers have
// synced. The dependencies go one way: sources and this package import storage, never each other.
package collect
