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
	// carried is what the server was holding for its readers at the sample, and the machine's load: the live heap
	// marked at a collection holds the answers in flight then, more of them when a busier machine slows them.
	carried carried
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

// slopeBlock is the width of the blocks slopeInterval fits: the RSS swings with what the collector last marked,
// for minutes at a time (builds in flight, the build caches' fill), so 10 s samples are far from independent and
// their own fit's error would claim a precision the run does not have; means of 5 minutes are nearer to it.
const slopeBlock = 5 * time.Minute

// slopeInterval fits v's means over each whole block of samples at or after from (v's unit per hour) and returns
// the slope and the half-width of its 95 % interval (Student's t over the blocks' residuals): how far a run of
// this length can tell a slope from its swings. Both are NaN with fewer than three blocks.
func slopeInterval(samples []memSample, from, block time.Duration, v func(memSample) float64) (slope, half float64) {
	type mean struct{ x, y, n float64 }
	var blocks []mean
	for _, s := range samples {
		y := v(s)
		if s.at < from || math.IsNaN(y) {
			continue
		}
		i := int((s.at - from) / block)
		for len(blocks) <= i {
			blocks = append(blocks, mean{})
		}
		b := &blocks[i]
		b.x, b.y, b.n = b.x+s.at.Hours(), b.y+y, b.n+1
	}
	var xs, ys []float64
	for _, b := range blocks {
		if b.n > 0 {
			xs, ys = append(xs, b.x/b.n), append(ys, b.y/b.n)
		}
	}
	n := float64(len(xs))
	if n < 3 {
		return math.NaN(), math.NaN()
	}
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i]/n, my+ys[i]/n
	}
	var sxx, sxy float64
	for i := range xs {
		sxx, sxy = sxx+(xs[i]-mx)*(xs[i]-mx), sxy+(xs[i]-mx)*(ys[i]-my)
	}
	if sxx == 0 {
		return math.NaN(), math.NaN()
	}
	slope = sxy / sxx
	var sse float64
	for i := range xs {
		r := ys[i] - my - slope*(xs[i]-mx)
		sse += r * r
	}
	return slope, studentT975(len(xs)-2) * math.Sqrt(sse/(n-2)/sxx)
}

// studentT975 is the 97.5th percentile of Student's t with df degrees of freedom (df >= 1): a table to 30, then
// 1.96 + 2.5/df, within 0.002 of it.
func studentT975(df int) float64 {
	table := [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
		2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if df <= len(table) {
		return table[max(df, 1)-1]
	}
	return 1.96 + 2.5/float64(df)
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
