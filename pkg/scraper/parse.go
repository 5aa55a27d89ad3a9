package scraper

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/prometheus/prometheus/model/textparse"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// What is present of a series in one response.
const (
	hasCPU uint8 = 1 << iota
	hasMemory
	hasStart
	hasSwap // optional: Windows nodes and older kubelets report none
)

// parseStats says what a response lost, for /metrics and the per-node log line. Values storage rejects (zero, NaN,
// infinite, negative) are not counted here: storage counts them.
type parseStats struct {
	BadLines      int   // lines textparse rejected; each lost only itself
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

// container accumulates one container's series of one response. It lives across responses of the same node, so a
// container that keeps reporting costs no allocation.
type container struct {
	namespace, pod, name string
	cpu, memory, start   float64
	swap                 float64
	cpuTS                int64
	has                  uint8
	epoch                uint64 // the parse that last saw it
	order                int32  // its index in the previous response's order (parser.prev), or -1
}

// parser turns one node's /metrics/resource responses into storage batches. It is not safe for concurrent use; the
// scraper keeps one per node so that its interned containers survive between scrapes.
type parser struct {
	containers map[string]*container // by namespace \x00 pod \x00 container
	seen       []*container          // this response's containers, in order of appearance
	prev       []*container          // the previous response's, which predicts each metric's order (lookup)
	key        []byte
	epoch      uint64
	// cursor is the index in prev of the container the next series of metric most likely belongs to.
	cursor int
	metric metric

	nodeCPU, nodeMemory float64
	nodeSwap            float64
	nodeTS              int64
	nodeHas             uint8
}

func newParser() *parser {
	return &parser{containers: make(map[string]*container)}
}

// parse reads body (the kubelet text format) into b's Nodes and Containers, reusing their storage. Samples without
// a timestamp take now. A body with spare capacity (as fetch returns it) is parsed in place, and textparse writes
// one newline into that spare capacity; otherwise it is copied once.
func (p *parser) parse(body []byte, now time.Time, node string, b *storage.Batch) parseStats {
	var stats parseStats
	p.epoch++
	p.seen = p.seen[:0]
	p.nodeHas = 0
	// A body cut off mid-line would otherwise parse its last line with a truncated value or timestamp.
	if n := len(body); n > 0 && body[n-1] != '\n' {
		// Capacity cut too: the append below copies, so textparse's own appended newline does not overwrite the
		// caller's bytes.
		end := bytes.LastIndexByte(body, '\n') + 1
		body = body[:end:end]
		stats.Truncated = true
	}
	if len(body) == cap(body) {
		// textparse appends a newline to its input; with spare capacity it lands in body's own array, which
		// offsetIn relies on to find where an error line starts.
		body = append(make([]byte, 0, len(body)+1), body...)
	}
	nowMs := now.UnixMilli()
	for pos := 0; pos < len(body); {
		pos = p.parseFrom(body, pos, nowMs, &stats)
	}
	p.finish(node, b, &stats)
	return stats
}

// parseFrom runs one textparse parser from pos until the end of body or its first error, and returns where to
// resume: after the line that failed. textparse stops at an error, so this is how a bad line loses only itself.
func (p *parser) parseFrom(body []byte, pos int, nowMs int64, stats *parseStats) int {
	// A nil symbol table is fine: Labels, the only user, is never called (it copies the series).
	tp := textparse.NewPromParser(body[pos:], nil, false)
	lineEnd := pos // end of the last good entry's line: an error is on the first non-blank line after it
	for {
		et, err := tp.Next()
		if errors.Is(err, io.EOF) {
			if skipBlank(body, lineEnd) == len(body) {
				return len(body)
			}
			// textparse also stops at a NUL byte as if at the end: only that line is bad.
			err = errors.New("unexpected NUL byte")
		}
		if err != nil {
			start := skipBlank(body, lineEnd)
			stats.BadLines++
			if stats.FirstError == nil {
				line := bytes.Count(body[:start], []byte{'\n'}) + 1
				stats.FirstError = fmt.Errorf("line %d: %w", line, err)
			}
			nl := bytes.IndexByte(body[start:], '\n')
			if nl < 0 {
				return len(body)
			}
			return start + nl + 1
		}
		var anchor []byte // a slice of the entry's line, to find its end
		skipFrom := false // the series is of a metric not read: skip the lines of others like it without lexing them
		switch et {
		case textparse.EntrySeries:
			series, ts, v := tp.Series()
			anchor = series
			t := nowMs
			if ts != nil {
				t = *ts
			}
			skipFrom = !p.sample(series, t, v, stats)
		case textparse.EntryType:
			anchor, _ = tp.Type()
		case textparse.EntryHelp:
			anchor, _ = tp.Help()
		case textparse.EntryComment:
			anchor = tp.Comment()
		}
		if off := offsetIn(body, anchor); off >= 0 {
			lineEnd = len(body)
			if nl := bytes.IndexByte(body[off+len(anchor):], '\n'); nl >= 0 {
				lineEnd = off + len(anchor) + nl + 1
			}
			if skipFrom {
				// A third of a kubelet response is pod-level series; skipping them with a byte scan, and
				// resuming textparse after them, saves lexing them.
				if next := skipOthers(body, lineEnd); next > lineEnd {
					return next
				}
			}
		}
	}
}

// sample merges one series into the node or its container. It reports false for a series of a metric that is not
// one it reads, so the caller may skip that metric's other series.
func (p *parser) sample(series []byte, ts int64, v float64, stats *parseStats) bool {
	s, ok := scanSeries(series)
	if !ok {
		stats.MissingLabels++
		return true
	}
	var bit uint8
	m := metricOf(s.name)
	switch m {
	case metricNodeCPU:
		if p.nodeValue(hasCPU, &p.nodeCPU, v, stats) {
			p.nodeTS = ts
		}
		return true
	case metricNodeMemory:
		p.nodeValue(hasMemory, &p.nodeMemory, v, stats)
		return true
	case metricNodeSwap:
		p.nodeValue(hasSwap, &p.nodeSwap, v, stats)
		return true
	case metricScrapeError:
		stats.ScrapeError = stats.ScrapeError || v != 0
		return true
	case metricContainerCPU:
		bit = hasCPU
	case metricContainerMemory:
		bit = hasMemory
	case metricContainerStart:
		bit = hasStart
	case metricContainerSwap:
		bit = hasSwap
	default:
		return false
	}
	if len(s.namespace) == 0 || len(s.pod) == 0 || len(s.container) == 0 {
		stats.MissingLabels++
		return true
	}
	if m != p.metric {
		p.metric, p.cursor = m, 0
	}
	c := p.lookup(s.namespace, s.pod, s.container)
	if c.has&bit != 0 {
		stats.Duplicates++
		return true
	}
	c.has |= bit
	switch bit {
	case hasCPU:
		c.cpu, c.cpuTS = v, ts
	case hasMemory:
		c.memory = v
	case hasStart:
		c.start = v
	case hasSwap:
		c.swap = v
	}
	return true
}

// nodeValue keeps the first value of a node series in a response; it reports false for a repeat.
func (p *parser) nodeValue(bit uint8, into *float64, v float64, stats *parseStats) bool {
	if p.nodeHas&bit != 0 {
		stats.Duplicates++
		return false
	}
	p.nodeHas |= bit
	*into = v
	return true
}

// lookup returns the container, interning it on first sight. The kubelet writes every metric's series in the same
// order (sorted by labels), which changes only when containers come or go, so the container of a metric's i-th
// series is most likely the previous response's i-th: comparing its three names is cheaper than hashing the key
// (a third of the parser's time went to the map). Otherwise the map lookup by string(p.key) does not allocate
// either, and resets the cursor after the container it found.
func (p *parser) lookup(namespace, pod, name []byte) *container {
	var c *container
	if p.cursor < len(p.prev) {
		if guess := p.prev[p.cursor]; guess.name == string(name) && guess.pod == string(pod) &&
			guess.namespace == string(namespace) {
			c = guess
		}
	}
	if c == nil {
		p.key = append(append(append(append(append(p.key[:0], namespace...), 0), pod...), 0), name...)
		if c = p.containers[string(p.key)]; c == nil {
			// One string holds the key and, as slices of it, the three names storage keeps: one allocation, not
			// four.
			key := string(p.key)
			podAt, nameAt := len(namespace)+1, len(namespace)+1+len(pod)+1
			c = &container{namespace: key[:len(namespace)], pod: key[podAt : podAt+len(pod)], name: key[nameAt:],
				order: -1}
			p.containers[key] = c
		}
		if c.order >= 0 {
			p.cursor = int(c.order)
		}
	}
	p.cursor++
	if c.epoch != p.epoch {
		c.epoch, c.has = p.epoch, 0
		p.seen = append(p.seen, c)
	}
	return c
}

// finish writes the merged samples into b and forgets containers this response did not mention.
func (p *parser) finish(node string, b *storage.Batch, stats *parseStats) {
	b.Nodes, b.Containers = b.Nodes[:0], b.Containers[:0]
	if p.nodeHas&(hasCPU|hasMemory) == hasCPU|hasMemory {
		b.Nodes = append(b.Nodes, storage.NodeSample{Node: node, Sample: storage.Sample{
			Timestamp: time.UnixMilli(p.nodeTS), CPU: p.nodeCPU, Memory: p.nodeMemory,
			Swap: p.nodeSwap, HasSwap: p.nodeHas&hasSwap != 0,
		}})
	} else {
		stats.NodeMissing = true
	}
	for _, c := range p.seen {
		if c.has&(hasCPU|hasMemory) != hasCPU|hasMemory {
			stats.Incomplete++
			continue
		}
		var start time.Time
		if c.has&hasStart != 0 {
			var ok bool
			if start, ok = secondsToTime(c.start); !ok {
				stats.BadStartTime++
			}
		}
		// The CPU timestamp is the sample's time: the rate storage computes divides by it.
		b.Containers = append(b.Containers, storage.ContainerSample{
			Namespace: c.namespace, Pod: c.pod, Container: c.name,
			Sample: storage.Sample{Timestamp: time.UnixMilli(c.cpuTS), StartTime: start, CPU: c.cpu, Memory: c.memory,
				Swap: c.swap, HasSwap: c.has&hasSwap != 0},
		})
	}
	if len(p.containers) > len(p.seen) {
		for k, c := range p.containers {
			if c.epoch != p.epoch {
				delete(p.containers, k)
			}
		}
	}
	// This response's order predicts the next one's.
	p.prev, p.seen = p.seen, p.prev[:0]
	for i, c := range p.prev {
		c.order = int32(i)
	}
	p.metric, p.cursor = metricOther, 0
}

// secondsToTime converts a start time in (fractional) Unix seconds, exact to the nanosecond for whole seconds.
func secondsToTime(v float64) (time.Time, bool) {
	// 1e11 s is the year 5138: anything later is garbage, and would overflow int64 nanoseconds.
	if math.IsNaN(v) || v <= 0 || v > 1e11 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(math.Round(frac*1e9))), true
}

// offsetIn returns where sub starts in body, or -1 when sub is not a slice of body's array. Both end at the same
// array end (textparse slices its input, which shares body's array), so the difference of capacities is the offset.
func offsetIn(body, sub []byte) int {
	if cap(sub) == 0 || cap(sub) > cap(body) {
		return -1
	}
	if &body[:cap(body)][cap(body)-1] != &sub[:cap(sub)][cap(sub)-1] {
		return -1
	}
	off := cap(body) - cap(sub)
	if off+len(sub) > len(body) {
		return -1
	}
	return off
}

func skipBlank(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n') {
		i++
	}
	return i
}
