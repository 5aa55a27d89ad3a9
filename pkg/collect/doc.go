// Package collect owns the collection cycle, its cadence and its health policy (DESIGN.md sections 1 and 3).
//
// One loop, Loop, every resolution begins a cycle in storage, gives the source a deadline (the source's Budget)
// and the cycle's Append, and commits the outcome the source returns, which storage records as the source's
// health (last success, last error) and publishes with a new snapshot; while the source collects, the loop asks
// storage every second to publish what has landed (Cycle.Publish). Cycles never overlap: one that overruns the
// resolution delays the next. Request timeouts are fitted to the resolution here (FitTimeout, MaxTimeout), and
// the API's /readyz and /livez ask the loop (Ready, Live) rather than judging storage's health themselves.
//
// A source (pkg/scraper for kubelets, pkg/adapter for Prometheus) fetches and parses only: it keeps no loop, no
// health and no knowledge of storage beyond the types of a batch. A source whose connections are costly to open
// declares it by implementing Warmer: Warm then collects from it before the first cycle, while the pods are still
// being listed, and the first cycle appends what it kept. The dependencies go one way: sources and this package
// import storage, never each other.
package collect
