package scraper

import "bytes"

// Which metric families of a kubelet response the parser reads, and how it passes over the others: a third of a
// response is pod-level series, and skipping them with a byte scan is cheaper than lexing them.

// metricName is the name part of a series as textparse returns it (name, then labels or the value).
func metricName(series []byte) []byte {
	for i, c := range series {
		if c == '{' || c == ' ' || c == '\t' || c == '\n' {
			return series[:i]
		}
	}
	return series
}

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

// metricOf is the one list of the metrics the parser reads, for sample and for skipOthers.
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

// skipOthers returns the end of the run of lines from pos that are series, HELP or TYPE lines of metrics sample
// does not read (exporters write each family's lines together), or pos when the next line is one it reads. A line
// it cannot tell (blank, another comment) ends the run too: textparse reads it.
func skipOthers(body []byte, pos int) int {
	var skipping []byte // the metric of the previous skipped series line: its next series skip without a lookup
	for pos < len(body) {
		line := body[pos:]
		if nl := bytes.IndexByte(line, '\n'); nl >= 0 {
			line = line[:nl+1]
		}
		if !seriesOf(line, skipping) {
			var name []byte
			switch {
			case bytes.HasPrefix(line, []byte("# HELP ")), bytes.HasPrefix(line, []byte("# TYPE ")):
				name = metricName(line[len("# HELP "):])
			case line[0] != '#' && line[0] != ' ' && line[0] != '\n':
				name = metricName(line)
				skipping = name
			}
			if len(name) == 0 || metricOf(name) != metricOther {
				return pos
			}
		}
		pos += len(line)
	}
	return pos
}

// seriesOf says whether line is a series of metric name.
func seriesOf(line, name []byte) bool {
	if len(name) == 0 || len(line) <= len(name) || !bytes.HasPrefix(line, name) {
		return false
	}
	c := line[len(name)]
	return c == '{' || c == ' ' || c == '\t'
}
