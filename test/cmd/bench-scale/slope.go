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
}

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
	var n, sum float64
	for _, s := range samples {
		if s.at >= from {
			n, sum = n+1, sum+s.rss
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / n
}
