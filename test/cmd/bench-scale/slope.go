package main

import (
	"math"
	"time"
)

// memSample is one reading of a server's memory during the soak.
type memSample struct {
	at        time.Duration // since the soak started
	rss, heap float64       // bytes: VmRSS, and the Go heap in use (go_memstats_heap_inuse_bytes; NaN if not served)
	// RSS's two parts, bytes: anonymous memory (RssAnon: heap, stacks, the runtime's own), where a leak would
	// grow, and file-backed (RssFile: the executable's pages touched so far, bounded by its size, page cache the
	// kernel may drop under pressure).
	anon, file float64
	// What a leak would be counted in (NaN if not served): go_goroutines, and metrics-ring's pods in storage
	// (metrics_ring_storage_objects{kind="pod"}), which the churn must keep at the cluster's pods.
	goroutines, pods float64
	// parts is the Go runtime's own account of its memory, to tell a leak (the live heap grows) from the
	// runtime's keeping (fragmentation, free pages not yet returned, the heap grown between collections).
	parts heapParts
}

// heapParts is what the Go runtime says its memory is made of (runtime/metrics, served by component-base's Go
// collector as go_gc_* and go_memory_classes_*), bytes; NaN where not served.
type heapParts struct {
	live    float64 // the heap marked live by the last collection (/gc/heap/live): what a leak grows
	goal    float64 // the heap size the next collection is due at (/gc/heap/goal)
	objects float64 // memory of objects, live or dead not yet swept (/memory/classes/heap/objects)
	unused  float64 // spans' room not holding objects (/memory/classes/heap/unused): fragmentation
	free    float64 // free pages kept, not returned to the OS (/memory/classes/heap/free)
	stacks  float64 // goroutine stacks (/memory/classes/heap/stacks and os-stacks)
	other   float64 // the runtime's own metadata (/memory/classes/metadata/*, profiling buckets, other)
}

// heapPartsMetrics names each part, as the soak's table does, and its metrics; a part with several is their sum.
var heapPartsMetrics = []struct {
	label string
	field func(*heapParts) *float64
	names []string
}{
	{"live heap (the last collection's mark)", func(p *heapParts) *float64 { return &p.live }, []string{"go_gc_heap_live_bytes"}},
	{"heap goal (the next collection's trigger)", func(p *heapParts) *float64 { return &p.goal }, []string{"go_gc_heap_goal_bytes"}},
	{"objects, live or not yet swept", func(p *heapParts) *float64 { return &p.objects }, []string{"go_memory_classes_heap_objects_bytes"}},
	{"spans' unused room (fragmentation)", func(p *heapParts) *float64 { return &p.unused }, []string{"go_memory_classes_heap_unused_bytes"}},
	{"free pages kept from the OS", func(p *heapParts) *float64 { return &p.free }, []string{"go_memory_classes_heap_free_bytes"}},
	{"stacks", func(p *heapParts) *float64 { return &p.stacks }, []string{"go_memory_classes_heap_stacks_bytes", "go_memory_classes_os_stacks_bytes"}},
	{"runtime's metadata and other", func(p *heapParts) *float64 { return &p.other }, []string{"go_memory_classes_metadata_mcache_free_bytes",
		"go_memory_classes_metadata_mcache_inuse_bytes", "go_memory_classes_metadata_mspan_free_bytes",
		"go_memory_classes_metadata_mspan_inuse_bytes", "go_memory_classes_metadata_other_bytes",
		"go_memory_classes_profiling_buckets_bytes", "go_memory_classes_other_bytes"}},
}

// readHeapParts takes the heap's parts from one scrape of a server's metrics.
func readHeapParts(m samples) heapParts {
	p := noHeapParts
	for _, part := range heapPartsMetrics {
		sum, found := 0.0, false
		for _, name := range part.names {
			if v, ok := m[name]; ok {
				sum, found = sum+v, true
			}
		}
		if found {
			*part.field(&p) = sum
		}
	}
	return p
}

// noHeapParts is a sample's parts when the server's metrics could not be read.
var noHeapParts = heapParts{math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()}

// slopePerHour is the least-squares slope of v over the samples at or after from, in v's unit per hour (NaN
// with fewer than two samples).
func slopePerHour(samples []memSample, from time.Duration, v func(memSample) float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, s := range samples {
		y := v(s)
		if s.at < from || math.IsNaN(y) {
			continue
		}
		x := s.at.Hours()
		n, sx, sy, sxx, sxy = n+1, sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if n < 2 || d == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / d
}

// minuteMinima keeps, of each whole minute's samples, the one with the lowest RSS: the floor the garbage
// collector returns to, whose rise is a leak where single samples swing with its rhythm.
func minuteMinima(samples []memSample) []memSample {
	var out []memSample
	for _, s := range samples {
		m := s.at.Truncate(time.Minute)
		if len(out) > 0 && out[len(out)-1].at.Truncate(time.Minute) == m {
			if s.rss < out[len(out)-1].rss {
				out[len(out)-1] = s
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// meanRSS is the mean RSS of the samples at or after from.
func meanRSS(samples []memSample, from time.Duration) float64 {
	return meanOf(samples, from, func(m memSample) float64 { return m.rss })
}

// meanOf is the mean of v over the samples at or after from where it is not NaN (NaN when there is none).
func meanOf(samples []memSample, from time.Duration, v func(memSample) float64) float64 {
	var n, sum float64
	for _, s := range samples {
		if y := v(s); s.at >= from && !math.IsNaN(y) {
			n, sum = n+1, sum+y
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / n
}
