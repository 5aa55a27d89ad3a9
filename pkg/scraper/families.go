package scraper

// Which metric families of a kubelet response the parser reads, and the byte classes of the text format. Lines of
// every other family (a third of a kubelet response is pod-level series) are passed over by their name alone.

// metric is how the parser reads a series of a metric: metricOther for every metric it does not read.
type metric uint8

const (
	metricOther metric = iota
	metricNodeCPU
	metricNodeMemory
	metricScrapeError
	metricContainerCPU
	metricContainerMemory
	metricContainerStart
	metricNodeSwap
	metricContainerSwap
)

// metricOf is the one list of the metrics the parser reads.
func metricOf(name []byte) metric {
	switch string(name) {
	case "node_cpu_usage_seconds_total":
		return metricNodeCPU
	case "node_memory_working_set_bytes":
		return metricNodeMemory
	case "resource_scrape_error":
		return metricScrapeError
	case "container_cpu_usage_seconds_total":
		return metricContainerCPU
	case "container_memory_working_set_bytes":
		return metricContainerMemory
	case "container_start_time_seconds":
		return metricContainerStart
	case "node_swap_usage_bytes":
		return metricNodeSwap
	case "container_swap_usage_bytes":
		return metricContainerSwap
	}
	return metricOther // pod_*, container_swap_limit_bytes and anything new
}

// Byte classes, as textparse's lexer (promlex.l) has them.
const (
	cNameStart  uint8 = 1 << iota // [a-zA-Z_:]: starts a metric name
	cName                         // [a-zA-Z0-9_:]
	cLabelStart                   // [a-zA-Z_]: starts a label name
	cLabel                        // [a-zA-Z0-9_]
	cValue                        // a value's bytes: all but NUL, space, tab, newline and '{'
	cPlain                        // quoted bytes needing no attention: all but NUL, newline, '"', '\\', non-ASCII
)

var class = func() (t [256]uint8) {
	for c := range 256 {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
		digit := '0' <= c && c <= '9'
		if letter || c == ':' {
			t[c] |= cNameStart | cName
		}
		if digit {
			t[c] |= cName | cLabel
		}
		if letter {
			t[c] |= cLabelStart | cLabel
		}
		if c != 0 && c != ' ' && c != '\t' && c != '\n' && c != '{' {
			t[c] |= cValue
		}
		if c != 0 && c != '\n' && c != '"' && c != '\\' && c < 0x80 {
			t[c] |= cPlain
		}
	}
	return t
}()
