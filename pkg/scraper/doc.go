// Package scraper is the kubelet source. Each Collect is one collection cycle, run by pkg/collect's loop within the
// scraper's Budget: it lists the nodes (optionally filtered by a label selector), fetches each kubelet's
// /metrics/resource endpoint over a shared keep-alive TLS client with bounded concurrency, a per-request timeout and
// a response-size cap, parses the Prometheus text format with a parser of its own that reads only the families it
// uses, in one pass with no allocation per line (a bad line loses only that line; prometheus/model/textparse is its
// oracle in a differential fuzz test), into one storage.Batch per node, hands it to the cycle's Append, and returns
// the cycle's outcome: a success when at least one node was scraped, or there was none to scrape, with an error
// naming the nodes that failed.
//
// It owns how a kubelet is reached and read: node addresses and credentials, the HTTP client, the parser, the
// workers a cycle needs (paced to the budget) and the buffers they borrow. It keeps no loop, no health and no say
// in which objects exist: its per-node state (a parser, failure streaks for logging once per streak) is a cache by
// the names the lister returns, forgotten when a node leaves it.
package scraper
