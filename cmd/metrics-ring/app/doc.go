// Package app is the metrics-ring command: its flags (every metrics-server v0.9 flag, with the same meaning, plus
// metrics-ring's own) and the wiring of the node and pod informers (trimmed as they arrive; their events tell
// storage which pods exist and on which node), storage, one source (the kubelet scraper or the Prometheus adapter)
// with the collection loop that runs it once the informers have synced, and the API server.
//
// A sample's path from a kubelet's bytes to the JSON, package by package: pkg/collect's loop begins a cycle and
// calls the source; pkg/scraper fetches a node's /metrics/resource and parses it into a storage.Batch; pkg/storage's
// Cycle.Append checks each sample and appends it to its series' ring, and Cycle.Commit publishes a snapshot;
// pkg/api joins the informers' objects with one snapshot and encodes NodeMetrics and PodMetrics.
package app
