package kubeletsim

import (
	"cmp"
	"compress/gzip"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/common/expfmt"
)

// The fast /metrics/resource renderer exists for the scale benchmark: through client_golang's registry a
// 30-pod node costs about a millisecond and 6,000 allocations per scrape, which at 10,000 nodes every 15 s is a
// core of the machine under test. It writes the same bytes, family order, sample order and float formatting as
// the kubelet's collector and registry (TestFastResourceIsByteIdentical holds it to that), and falls back to the
// real collector for any format other than the plain text one.

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
var renderBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

type family struct{ name, help, typ string }

var (
	famContainerCPU   = family{"container_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the container in core-seconds", "counter"}
	famContainerMem   = family{"container_memory_working_set_bytes", "[STABLE] Current working set of the container in bytes", "gauge"}
	famContainerStart = family{"container_start_time_seconds", "[STABLE] Start time of the container since unix epoch in seconds", "gauge"}
	famContainerSwap  = family{"container_swap_usage_bytes", "[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", "gauge"}
	famNodeCPU        = family{"node_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the node in core-seconds", "counter"}
	famNodeMem        = family{"node_memory_working_set_bytes", "[STABLE] Current working set of the node in bytes", "gauge"}
	famNodeSwap       = family{"node_swap_usage_bytes", "[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", "gauge"}
	famPodCPU         = family{"pod_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", "counter"}
	famPodMem         = family{"pod_memory_working_set_bytes", "[STABLE] Current working set of the pod in bytes", "gauge"}
	famPodSwap        = family{"pod_swap_usage_bytes", "[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", "gauge"}
	famResourceErr    = family{"resource_scrape_error", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", "gauge"}
	famScrapeErr      = family{"scrape_error", "[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise", "gauge"}
)

type podContainer struct {
	p *pod
	c *container
}

// sortedLocked returns the node's containers in the registry's sample order (label values in label-name order:
// container, namespace, pod) and its pods by (namespace, pod), cached until the pod set changes. Needs n.mu.
func (n *node) sortedLocked() ([]podContainer, []*pod) {
	if n.sortedValid {
		return n.sortedCs, n.sortedPods
	}
	n.sortedCs, n.sortedPods = n.sortedCs[:0], append(n.sortedPods[:0], n.pods...)
	for _, p := range n.pods {
		for _, c := range p.containers {
			n.sortedCs = append(n.sortedCs, podContainer{p, c})
		}
	}
	slices.SortFunc(n.sortedCs, func(a, b podContainer) int {
		return cmp.Or(strings.Compare(a.c.name, b.c.name), strings.Compare(a.p.namespace, b.p.namespace),
			strings.Compare(a.p.name, b.p.name))
	})
	slices.SortFunc(n.sortedPods, func(a, b *pod) int {
		return cmp.Or(strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name))
	})
	n.sortedValid = true
	return n.sortedCs, n.sortedPods
}

// renderResource appends the node's /metrics/resource in the text format, sampled at the request time.
func (n *node) renderResource(b []byte) []byte {
	t := timeNow().Truncate(1e6)
	ns, ms := t.UnixNano(), t.UnixMilli()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fresh {
		return n.appendErrorFamilies(n.renderFresh(b, ms))
	}
	cs, pods := n.sortedLocked()
	if len(cs) > 0 {
		b = header(b, famContainerCPU)
		for _, pc := range cs {
			b = containerSample(b, famContainerCPU.name, pc, float64(pc.c.cpu.at(ns))/1e9, ms)
		}
		b = header(b, famContainerMem)
		for _, pc := range cs {
			b = containerSample(b, famContainerMem.name, pc, float64(pc.c.memory), ms)
		}
		b = header(b, famContainerStart)
		for _, pc := range cs {
			b = containerSample(b, famContainerStart.name, pc, float64(pc.c.start.UnixNano())/1e9, -1)
		}
		b = header(b, famContainerSwap)
		for _, pc := range cs {
			b = containerSample(b, famContainerSwap.name, pc, float64(pc.c.swap), ms)
		}
	}
	nodeMem, nodeSwap := uint64(NodeOverheadMemoryBytes), uint64(0)
	for _, p := range n.pods {
		for _, c := range p.containers {
			nodeMem, nodeSwap = nodeMem+c.memory, nodeSwap+c.swap
		}
	}
	b = appendSample(header(b, famNodeCPU), famNodeCPU.name, float64(n.cpu.at(ns))/1e9, ms)
	b = appendSample(header(b, famNodeMem), famNodeMem.name, float64(nodeMem), ms)
	b = appendSample(header(b, famNodeSwap), famNodeSwap.name, float64(nodeSwap), ms)
	if len(pods) > 0 {
		for _, f := range []family{famPodCPU, famPodMem, famPodSwap} {
			b = header(b, f)
			for _, p := range pods {
				var cpu, mem, swap uint64
				for _, c := range p.containers {
					cpu, mem, swap = cpu+c.cpu.at(ns), mem+c.memory, swap+c.swap
				}
				v := float64(swap)
				switch f {
				case famPodCPU:
					v = float64(cpu) / 1e9
				case famPodMem:
					v = float64(mem)
				}
				b = podSample(b, f.name, p, v, ms)
			}
		}
	}
	return n.appendErrorFamilies(b)
}

func (n *node) appendErrorFamilies(b []byte) []byte {
	b = appendSample(header(b, famResourceErr), famResourceErr.name, 0, -1)
	return appendSample(header(b, famScrapeErr), famScrapeErr.name, 0, -1)
}

func header(b []byte, f family) []byte {
	b = append(append(append(append(b, "# HELP "...), f.name...), ' '), f.help...)
	return append(append(append(append(b, "\n# TYPE "...), f.name...), ' '), f.typ+"\n"...)
}

func containerSample(b []byte, name string, pc podContainer, v float64, ms int64) []byte {
	b = append(append(b, name...), `{container="`...)
	b = appendEscaped(b, pc.c.name)
	b = appendEscaped(append(b, `",namespace="`...), pc.p.namespace)
	b = appendEscaped(append(b, `",pod="`...), pc.p.name)
	return appendValue(append(b, `"} `...), v, ms)
}

func podSample(b []byte, name string, p *pod, v float64, ms int64) []byte {
	b = appendEscaped(append(append(b, name...), `{namespace="`...), p.namespace)
	b = appendEscaped(append(b, `",pod="`...), p.name)
	return appendValue(append(b, `"} `...), v, ms)
}

func appendSample(b []byte, name string, v float64, ms int64) []byte {
	return appendValue(append(append(b, name...), ' '), v, ms)
}

// appendValue writes a float as expfmt's writeFloat does, then the timestamp when ms >= 0.
func appendValue(b []byte, v float64, ms int64) []byte {
	switch {
	case v == 1, v == 0, v == -1:
		b = strconv.AppendInt(b, int64(v), 10)
	case math.IsNaN(v):
		b = append(b, "NaN"...)
	case math.IsInf(v, 1):
		b = append(b, "+Inf"...)
	case math.IsInf(v, -1):
		b = append(b, "-Inf"...)
	default:
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	if ms >= 0 {
		b = strconv.AppendInt(append(b, ' '), ms, 10)
	}
	return append(b, '\n')
}

// appendEscaped escapes a label value as the text format requires.
func appendEscaped(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "\\\"\n") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, s[i])
		}
	}
	return b
}

// serveFastResource answers plain-text requests itself, with the headers and compression client_golang's
// handler would use, and hands every other format (and a node reporting foreign pods) to the real collector.
func (n *node) serveFastResource(w http.ResponseWriter, r *http.Request) {
	format := expfmt.Negotiate(r.Header)
	if format.FormatType() != expfmt.TypeTextPlain || n.foreign.Load() != nil { // the collector renders foreign pods
		n.resourceHandler().ServeHTTP(w, r)
		return
	}
	bp := renderBufs.Get().(*[]byte)
	defer renderBufs.Put(bp)
	*bp = n.renderResource((*bp)[:0])
	w.Header().Set("Content-Type", string(format))
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		_, _ = w.Write(*bp)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	gz := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(gz)
	gz.Reset(w)
	_, _ = gz.Write(*bp)
	_ = gz.Close()
}

func acceptsGzip(h string) bool {
	for part := range strings.SplitSeq(h, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) == "gzip" && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
