package scraper

import (
	"bytes"
	"fmt"
	"time"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// parseStats says what a response lost, for /metrics and the per-node log line. Values storage rejects (zero, NaN,
// infinite, negative) are not counted here: storage counts them.
type parseStats struct {
	BadLines      int   // lines read (lex.go) that the format rejects; each lost only itself
	FirstError    error // the first of them, with its line number
	Truncated     bool  // the body's last line had no newline (cut off): dropped
	Duplicates    int   // repeated series; the first one is kept
	MissingLabels int   // container series without namespace, pod or container
	Incomplete    int   // containers without CPU or memory: skipped
	NodeMissing   bool  // no node CPU or memory: no node sample
	BadStartTime  int   // unusable container_start_time_seconds: sent as unknown
	ScrapeError   bool  // the kubelet's own resource_scrape_error was set
}

// problems reports whether anything was lost.
func (s *parseStats) problems() bool {
	return s.BadLines+s.Duplicates+s.MissingLabels+s.Incomplete+s.BadStartTime > 0 || s.Truncated || s.NodeMissing
}

// parser turns one node's /metrics/resource responses into storage batches. It is not safe for concurrent use; the
// scraper keeps one per node so that its interned containers survive between scrapes.
type parser struct {
	lexer
	seen  []*parsedContainer // this response's containers, in order of appearance: batch.Containers[i]'s
	prev  []*parsedContainer // the previous response's, which predicts each metric's order (lookup)
	fresh []*parsedContainer // this response's containers that the previous one did not have
	// index holds the known containers by namespace \x00 pod \x00 container while responses miss the predicted
	// order often (lookup), nil otherwise; misses counts this response's.
	index  map[string]*parsedContainer
	misses int
	key    []byte
	epoch  uint32
	batch  *storage.Batch // the batch being parsed into (parse), nil between responses
	// cursor is the index in prev of the container the next series of metric most likely belongs to.
	cursor int
	metric metric

	nodeCPU, nodeMemory float64
	nodeSwap            float64
	nodeTS              int64
	nodeHas             uint8
}

func newParser() *parser {
	return &parser{}
}

// firstErrorBytes is how much of the first bad line its error quotes.
const firstErrorBytes = 160

// parse reads body (the kubelet text format) into b's Nodes and Containers, reusing their storage, in one pass
// over the bytes that allocates nothing per line. Samples without a timestamp take now. body is not changed.
func (p *parser) parse(body []byte, now time.Time, node string, b *storage.Batch) parseStats {
	var stats parseStats
	p.begin(b)
	// A body cut off mid-line would otherwise parse its last line with a truncated value or timestamp. Every line
	// now ends with a newline, which the lexer relies on.
	if n := len(body); n > 0 && body[n-1] != '\n' {
		body = body[:bytes.LastIndexByte(body, '\n')+1]
		stats.Truncated = true
	}
	nowMs := now.UnixMilli()
	var s parsedLine
	for pos, line := 0, 1; pos < len(body); line++ {
		next, err := p.line(body, pos, &s)
		switch {
		case err != nil:
			p.badLine(body, pos, next, line, err, &stats)
			next += bytes.IndexByte(body[next:], '\n') + 1
		case s.metric != metricOther:
			ts := nowMs
			if s.hasTS {
				ts = s.ts
			}
			p.sample(&s, ts, &stats)
		}
		pos = next
	}
	p.reset()
	p.finish(node, b, &stats)
	return stats
}

// begin readies the parser for a response, parsed into b.
func (p *parser) begin(b *storage.Batch) {
	p.epoch++
	p.seen = p.seen[:0]
	p.nodeHas = 0
	// The batch's entries hold names: cleared, those of a larger response before keep no deleted pod's.
	clear(b.Containers[:cap(b.Containers)])
	p.batch, b.Containers = b, b.Containers[:0]
}

// badLine counts the line from start that went wrong at at, and keeps the response's first error.
func (p *parser) badLine(body []byte, start, at, line int, err error, stats *parseStats) {
	stats.BadLines++
	if stats.FirstError != nil {
		return
	}
	text := body[start : at+bytes.IndexByte(body[at:], '\n')]
	if len(text) > firstErrorBytes {
		text = text[:firstErrorBytes]
	}
	stats.FirstError = fmt.Errorf("line %d: %w: %q", line, err, text)
}
