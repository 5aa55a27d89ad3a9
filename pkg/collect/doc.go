// Package collect owns the collection cycle (DESIGN.md section 1): one loop, Loop, that every resolution begins a
// cycle in storage, gives the source a deadline (the source's Budget) and the cycle's Append, and commits the
// outcome the source reports, which storage records as the source's health and publishes with a new snapshot.
//
// A source (the kubelet scraper, the Prometheus adapter) fetches and parses only: it keeps no loop, no health and
// no knowledge of storage beyond the types of a batch. The loop times each cycle
// (metrics_ring_<source>_collection_duration_seconds); cmd builds one source, one loop, and runs it once the
// informers have synced.
package collect
