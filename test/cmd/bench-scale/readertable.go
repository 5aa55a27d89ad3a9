package main

import (
	"fmt"
	"math"
)

func (r *result) printReaders(t table) {
	o := r.opts
	fmt.Fprintln(t.tw)
	fmt.Fprintf(t.tw, "readers: %d watchers of all %d pods and %d clients paging through them %d at a time (one connection each) via %s for %s, JSON\n",
		o.readersWatchers, o.nodes*o.pods, o.readersPagers, o.readersPageSize, o.loadVia, o.readersDuration)
	fmt.Fprintf(t.tw, "a watcher is due an ADDED per pod, then a MODIFIED per pod per collection (the simulator changes every sample), up to the newest collection at the deadline, within %s after it\n",
		readersGrace(o))
	t.header("reader measure")
	rd := func(f func(*readersResult) float64) func(*targetResult) float64 {
		return func(r *targetResult) float64 {
			if r.readers == nil {
				return math.NaN()
			}
			return f(r.readers)
		}
	}
	n := func(f func(*readersResult) int) func(*targetResult) float64 {
		return rd(func(r *readersResult) float64 { return float64(f(r)) })
	}
	t.row("RSS idle, before the phase", true, mibf, rd(func(r *readersResult) float64 { return float64(r.rssIdle) }))
	t.row("RSS peak during it", true, mibf, rd(func(r *readersResult) float64 { return float64(r.rssPeak) }))
	t.row("  peak / idle (goal <= 2)", true, ratio, rd(func(r *readersResult) float64 { return float64(r.rssPeak) / float64(r.rssIdle) }))
	t.row("  peak includes VmHWM, not only 0.5 s samples", false, yesNo, rd(func(r *readersResult) float64 { return b2f(r.hwmReset) }))
	t.row("stopped at -readers-rss-limit", false, yesNo, rd(func(r *readersResult) float64 { return b2f(r.capped) }))
	t.row("elapsed", false, secs, rd(func(r *readersResult) float64 { return r.elapsed.Seconds() }))
	t.row("collections in it (resourceVersions)", false, count, n(func(r *readersResult) int { return int(r.collections) }))
	t.row("events per watcher, min", true, count, n(func(r *readersResult) int { return r.eventsMin }))
	t.row("events per watcher, median", true, count, n(func(r *readersResult) int { return r.eventsMedian }))
	t.row("  events due per watcher, median", false, count, n(func(r *readersResult) int { return r.dueMedian }))
	t.row("watchers that received events", false, count, n(func(r *readersResult) int { return r.watchersOpen }))
	t.row("watchers that received every event due", false, count, n(func(r *readersResult) int { return r.caughtUp }))
	t.row("watchers that fell behind", false, count, n(func(r *readersResult) int { return r.behind }))
	t.row("watchers ended or refused (410, ERROR, closed)", false, count, n(func(r *readersResult) int { return r.ended }))
	t.row("pages answered", true, count, n(func(r *readersResult) int { return r.pages }))
	t.row("page latency p50", true, secs, rd(func(r *readersResult) float64 { return r.pageP50.Seconds() }))
	t.row("page latency p99", true, secs, rd(func(r *readersResult) float64 { return r.pageP99.Seconds() }))
	t.row("full page-throughs completed", true, count, n(func(r *readersResult) int { return r.throughs }))
	t.row("  of them without every pod", false, count, n(func(r *readersResult) int { return r.short }))
	t.row("page errors (not 429)", false, count, n(func(r *readersResult) int { return r.errors }))
	t.row("page 429s", false, count, n(func(r *readersResult) int { return r.tooMany }))
	t.row("collection cycles in it", false, count, rd(func(r *readersResult) float64 { return r.coll.cycles }))
	t.row("  intervals in it", false, count, rd(func(r *readersResult) float64 { return r.expectedCycles }))
	t.row("cycle duration, mean", true, seconds, rd(func(r *readersResult) float64 { return r.coll.cycleMean }))
	t.row("cycle duration, p99 (histogram)", false, seconds, rd(func(r *readersResult) float64 { return r.coll.cycleP99 }))
	t.row("failed kubelet requests in it", false, count, rd(func(r *readersResult) float64 { return r.coll.failuresInWindow }))
	t.row("collection kept its interval", false, yesNo, rd(func(r *readersResult) float64 {
		return keptInterval(r.coll, r.expectedCycles, o.resolution)
	}))
	t.row("CPU during the phase", true, cpu, rd(func(r *readersResult) float64 { return r.coll.cpuPerMin }))
	for _, tr := range t.targets {
		if tr.readers == nil {
			fmt.Fprintf(t.tw, "  %s: no reader phase (it serves no watch)\n", tr.name)
			continue
		}
		t.footnote(tr.name, tr.readers.coll, tr.readers.failures)
	}
}

func ratio(v float64) string { return fmt.Sprintf("%.2f", v) }

// yesNo formats a verdict: 1 yes, 0 no, NaN none.
func yesNo(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v != 0:
		return "yes"
	}
	return "no"
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
