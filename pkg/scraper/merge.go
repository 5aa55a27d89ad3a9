package scraper

import (
	"math"
	"time"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// How the series of one response become one storage.Batch: each container's series lines merged into one sample, the
// first of repeated series kept, containers interned across responses of the same node.

// What is present of a series in one response.
const (
	hasCPU uint8 = 1 << iota
	hasMemory
	hasStart
	hasSwap // optional: Windows nodes and older kubelets report none
)

// parsedContainer is one container a node's responses report, interned across them, so a container that keeps
// reporting costs no allocation (storage's container is the series its samples go to). Its values of a response go
// straight into that response's batch entry (at): one kept between responses holds names and bookkeeping only
// (BENCHMARKS.md, "Figures behind the comments").
type parsedContainer struct {
	namespace, pod, name string
	epoch                uint32 // the parse that last saw it
	order                int32  // its index in the previous response's order (parser.prev), or -1
	at                   int32  // its entry in the batch being parsed, when epoch is the parse's
	has                  uint8
	badStart             bool // the response's start time was not a valid time
}

// sample merges one series of a metric the parser reads into the node or its container.
func (p *parser) sample(s *parsedLine, ts int64, stats *parseStats) {
	v := s.value
	var bit uint8
	switch s.metric {
	case metricNodeCPU:
		if p.nodeValue(hasCPU, &p.nodeCPU, v, stats) {
			p.nodeTS = ts
		}
		return
	case metricNodeMemory:
		p.nodeValue(hasMemory, &p.nodeMemory, v, stats)
		return
	case metricNodeSwap:
		p.nodeValue(hasSwap, &p.nodeSwap, v, stats)
		return
	case metricScrapeError:
		stats.ScrapeError = stats.ScrapeError || v != 0
		return
	case metricContainerCPU:
		bit = hasCPU
	case metricContainerMemory:
		bit = hasMemory
	case metricContainerStart:
		bit = hasStart
	case metricContainerSwap:
		bit = hasSwap
	default:
		return
	}
	if len(s.namespace) == 0 || len(s.pod) == 0 || len(s.container) == 0 {
		stats.MissingLabels++
		return
	}
	if s.metric != p.metric {
		p.metric, p.cursor = s.metric, 0
	}
	c := p.lookup(s.namespace, s.pod, s.container)
	if c.has&bit != 0 {
		stats.Duplicates++
		return
	}
	c.has |= bit
	e := &p.batch.Containers[c.at].Sample
	switch bit {
	case hasCPU:
		// The CPU timestamp is the sample's time: the rate storage computes divides by it.
		e.CPU, e.Timestamp = v, time.UnixMilli(ts)
	case hasMemory:
		e.Memory = v
	case hasStart:
		var ok bool
		e.StartTime, ok = secondsToTime(v)
		c.badStart = !ok
	case hasSwap:
		e.Swap, e.HasSwap = v, true
	}
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

// lookup returns the container, interning it on first sight. The kubelet writes every metric's series lines in the same
// order (sorted by labels), which changes only when containers come or go, so the container of a metric's i-th
// series is most likely the previous response's i-th: comparing its three names is cheaper than hashing the key
// (a third of the parser's time went to the map). A miss searches the previous response's containers and the
// ones new in this one, and resets the cursor after the container it found: a few misses a response (containers
// came or went) cost that much less than a map of every container of every node, kept for the life of the process
// (BENCHMARKS.md, "Figures behind the comments"). Past maxMisses in one response (a kubelet that shuffles its
// series), the parser indexes its containers in a map for the rest of that response and keeps it while responses
// keep missing, so no order costs more than a hash a series.
func (p *parser) lookup(namespace, pod, name []byte) *parsedContainer {
	var c *parsedContainer
	if p.cursor < len(p.prev) && p.prev[p.cursor].is(namespace, pod, name) {
		c = p.prev[p.cursor]
	} else {
		c = p.find(namespace, pod, name)
		if c == nil {
			// One string holds the names storage keeps: one allocation, not three. Without the index's separators,
			// which would cost every container kept 2 bytes, often a larger size class (BENCHMARKS.md, "Figures
			// behind the comments").
			key := string(namespace) + string(pod) + string(name)
			podAt, nameAt := len(namespace), len(namespace)+len(pod)
			c = &parsedContainer{namespace: key[:podAt], pod: key[podAt:nameAt], name: key[nameAt:], order: -1}
			p.fresh = append(p.fresh, c)
			if p.index != nil {
				p.index[string(keyOf(p, namespace, pod, name))] = c
			}
		}
		if c.order >= 0 {
			p.cursor = int(c.order)
		}
	}
	p.cursor++
	if c.epoch != p.epoch {
		c.epoch, c.has, c.badStart = p.epoch, 0, false
		c.at = int32(len(p.batch.Containers))
		p.seen = append(p.seen, c)
		p.batch.Containers = append(p.batch.Containers, storage.ContainerSample{Namespace: c.namespace, Pod: c.pod,
			Container: c.name})
	}
	return c
}

// maxMisses is how many lookups of one response may search the containers one by one before the parser indexes
// them in a map.
const maxMisses = 16

// find returns the known container with these names (the previous response's, or new in this one), or nil.
func (p *parser) find(namespace, pod, name []byte) *parsedContainer {
	p.misses++
	if p.index == nil && p.misses > maxMisses {
		p.index = make(map[string]*parsedContainer, len(p.prev)+len(p.fresh))
		for _, cs := range [2][]*parsedContainer{p.prev, p.fresh} {
			for _, c := range cs {
				p.index[string(keyOf(p, c.namespace, c.pod, c.name))] = c
			}
		}
	}
	if p.index != nil {
		return p.index[string(keyOf(p, namespace, pod, name))]
	}
	for _, cs := range [2][]*parsedContainer{p.prev, p.fresh} {
		for _, c := range cs {
			if c.is(namespace, pod, name) {
				return c
			}
		}
	}
	return nil
}

// keyOf is the index's key for the names (namespace \x00 pod \x00 container), in the parser's scratch: from a
// response's bytes, or from a known container's strings when the index is built.
func keyOf[T string | []byte](p *parser, namespace, pod, name T) []byte {
	p.key = append(append(append(append(append(p.key[:0], namespace...), 0), pod...), 0), name...)
	return p.key
}

func (c *parsedContainer) is(namespace, pod, name []byte) bool {
	return c.name == string(name) && c.pod == string(pod) && c.namespace == string(namespace)
}

// finish writes the node's sample into b, keeps the containers that reported both CPU and memory (in the order
// they first appeared), and forgets containers this response did not mention.
func (p *parser) finish(node string, b *storage.Batch, stats *parseStats) {
	b.Nodes = b.Nodes[:0]
	if p.nodeHas&(hasCPU|hasMemory) == hasCPU|hasMemory {
		b.Nodes = append(b.Nodes, storage.NodeSample{Node: node, Sample: storage.Sample{
			Timestamp: time.UnixMilli(p.nodeTS), CPU: p.nodeCPU, Memory: p.nodeMemory,
			Swap: p.nodeSwap, HasSwap: p.nodeHas&hasSwap != 0,
		}})
	} else {
		stats.NodeMissing = true
	}
	kept := b.Containers[:0] // seen[i]'s entry is b.Containers[i]: compacted in place
	for i, c := range p.seen {
		if c.has&(hasCPU|hasMemory) != hasCPU|hasMemory {
			stats.Incomplete++
			continue
		}
		if c.badStart {
			stats.BadStartTime++
		}
		kept = append(kept, b.Containers[i])
	}
	b.Containers = kept
	p.batch = nil
	// This response's order predicts the next one's; the containers it did not mention are forgotten with the
	// previous order, whose array, cleared, takes the next response's: a stale pointer in it would keep a deleted
	// pod's container and names for as long as the node lives. An array far larger than this response (the node
	// held many more pods once) is let go. The index outlives a response that needed it, until one does not.
	old := p.prev
	clear(old)
	p.prev, p.seen = p.seen, old[:0]
	if p.oversized(old) {
		p.seen = nil
	}
	for i, c := range p.prev {
		c.order = int32(i)
	}
	clear(p.fresh)
	p.fresh = p.fresh[:0]
	if p.oversized(p.fresh) { // sized by a node's first response, every container new then
		p.fresh = nil
	}
	if p.index != nil {
		if p.misses <= maxMisses {
			p.index = nil
		} else {
			for k, c := range p.index {
				if c.epoch != p.epoch {
					delete(p.index, k)
				}
			}
		}
	}
	p.metric, p.cursor, p.misses = metricOther, 0, 0
}

// spareContainers is how much larger than its last response a parser's array of containers may stay.
const spareContainers = 32

// oversized reports whether an array of containers is far larger than the last response (prev) needs.
func (p *parser) oversized(cs []*parsedContainer) bool {
	return cap(cs) > 2*len(p.prev)+spareContainers
}

// maxStartSeconds is the latest start time int64 Unix nanoseconds hold (the year 2262): time.Time.UnixNano of a
// later one wraps (a container_start_time_seconds of 2.02e10 became a start 5 s before its sample).
const maxStartSeconds = float64(math.MaxInt64) / 1e9

// secondsToTime converts a start time in (fractional) Unix seconds, exact to the nanosecond for whole seconds.
// Storage judges it against its sample's time (after it, or absurdly before it, is invalid).
func secondsToTime(v float64) (time.Time, bool) {
	if math.IsNaN(v) || v <= 0 || v >= maxStartSeconds {
		return time.Time{}, false
	}
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(math.Round(frac*1e9))), true
}
