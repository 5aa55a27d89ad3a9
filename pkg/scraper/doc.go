// Package scraper is the kubelet source: every metric resolution it lists the nodes (optionally filtered by a label
// selector), fetches each kubelet's /metrics/resource endpoint over a shared keep-alive TLS client with bounded
// concurrency, a per-request timeout and a response-size cap, parses the Prometheus text format with a parser of its
// own that reads only the families it uses, in one pass with no allocation per line (a bad line loses only that
// line; prometheus/model/textparse is its oracle in a differential fuzz test) and feeds one storage.Batch per node
// to storage, ending every cycle with its outcome for the health checks of DESIGN.md section 3.
//
// One concern per file: options.go (defaults and validation), address.go (which address of a node to dial),
// client.go (TLS, auth, the HTTP request and its limits), parse.go, lex.go, tokens.go and families.go (text format
// to series), merge.go (series to one sample per container), scraper.go (the collection loop, per-node failure
// streaks), worker.go (one node's scrape: a panic contained to it, buffers a large response grew given back) and
// metrics.go (self-metrics).
package scraper
