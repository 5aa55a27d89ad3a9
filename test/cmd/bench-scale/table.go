package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// result is everything one run measured.
type result struct {
	opts         options
	registration time.Duration
	targets      []*targetResult
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func msf(s float64) string { return fmt.Sprintf("%.1f ms", s*1000) }

func seconds(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case math.IsInf(v, 1):
		return "> last bucket"
	}
	return fmt.Sprintf("%.3f s", v)
}

func count(v float64) string { return fmt.Sprintf("%.0f", v) }

func cpu(v float64) string { return fmt.Sprintf("%.2f CPU-s/min", v) }

// table prints rows of one value per target and, with more than one target, the ratio of the first target's
// value to each other's.
type table struct {
	tw      *tabwriter.Writer
	targets []*targetResult
}

func (t table) header(first string) {
	cols := []string{first}
	for _, r := range t.targets {
		cols = append(cols, r.name)
	}
	for i := 1; i < len(t.targets); i++ {
		cols = append(cols, ratioLabel(i))
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
	for i, c := range cols {
		cols[i] = strings.Repeat("-", len(c))
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

// row prints label and f's value for each target; ratio says whether a ratio means anything for it.
func (t table) row(label string, ratio bool, format func(float64) string, f func(*targetResult) float64) {
	cols := []string{label}
	var vs []float64
	for _, r := range t.targets {
		v := f(r)
		vs = append(vs, v)
		cols = append(cols, format(v))
	}
	for _, v := range vs[min(1, len(vs)):] {
		if ratio && v > 0 && !math.IsNaN(vs[0]) && !math.IsInf(vs[0], 0) && !math.IsInf(v, 0) {
			cols = append(cols, fmt.Sprintf("%.2f", vs[0]/v))
		} else {
			cols = append(cols, "")
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

// ratioLabel heads the column of the first target's values divided by target i's.
func ratioLabel(i int) string {
	nth := fmt.Sprintf("%dth", i+1)
	if i < 3 {
		nth = []string{"", "2nd", "3rd"}[i]
	}
	return "ratio (1st/" + nth + ")"
}

func (r *result) print(w io.Writer) {
	o := r.opts
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nscale benchmark: %d nodes x %d pods%s x %d containers (%d pods, %d container series), %d namespaces, resolution %s\n",
		o.nodes, o.pods, o.spreadNote(), o.containers, o.nodes*o.pods, o.nodes*o.pods*o.containers, o.nsCount, o.resolution)
	fmt.Fprintf(tw, "registration of the Nodes and Pods took %s; the servers ran one after the other on the same cluster\n\n",
		r.registration.Round(time.Second))
	t := table{tw: tw, targets: r.targets}
	t.header("measure")
	t.row("first complete answer, direct (from process start)", true, secs, func(r *targetResult) float64 { return r.firstDirect.Seconds() })
	t.row("  the request that got it sent at", true, secs, func(r *targetResult) float64 { return r.firstAsked.Seconds() })
	t.row("first complete answer, through kube-apiserver", true, secs, func(r *targetResult) float64 { return r.firstAggregated.Seconds() })
	if o.scale {
		r.printScale(t)
	}
	if o.readers {
		r.printReaders(t)
	}
	if o.pageThrough {
		r.printPageThrough(t)
	}
	if o.attack {
		r.printAttack(t)
	}
	if o.load {
		r.printLoad(t)
	}
	if o.soak > 0 {
		r.printSoak(t)
	}
	tw.Flush()
}

func secs(v float64) string { return fmt.Sprintf("%.2f s", v) }

func (r *result) printScale(t table) {
	o := r.opts
	c := func(f func(*collection) float64) func(*targetResult) float64 {
		return func(r *targetResult) float64 { return f(&r.coll) }
	}
	t.row(fmt.Sprintf("collection CPU (no API load, %s window)", o.measure), true, cpu, c(func(c *collection) float64 { return c.cpuPerMin }))
	t.row("collection cycles in the window", false, count, c(func(c *collection) float64 { return c.cycles }))
	t.row("cycle duration, mean", true, seconds, c(func(c *collection) float64 { return c.cycleMean }))
	t.row("cycle duration, p99 (histogram)", false, seconds, c(func(c *collection) float64 { return c.cycleP99 }))
	t.row("failed kubelet requests since start", false, count, c(func(c *collection) float64 { return c.failures }))
	t.row("RSS (VmRSS) after the window", true, mibf, c(func(c *collection) float64 { return float64(c.rss) }))
	t.row("  of which file-backed (RssFile: the binary's pages)", false, mibf, c(func(c *collection) float64 { return float64(c.rssFile) }))
	t.row("  Go heap spans in use (heap_inuse)", false, mibf, c(func(c *collection) float64 { return c.heapInuse }))
	t.row("  Go heap freed, not returned (heap_idle - heap_released)", false, mibf, c(func(c *collection) float64 { return c.heapRetained }))
	t.row("  goroutine stacks (stack_inuse)", false, mibf, c(func(c *collection) float64 { return c.stacks }))
	t.row("  Go runtime's own (mspan, mcache, gc, other sys)", false, mibf, c(func(c *collection) float64 { return c.runtimeSys }))
	t.row("peak RSS (VmHWM) after the window", true, mibf, c(func(c *collection) float64 { return float64(c.peakRSS) }))
	t.row("peak RSS (VmHWM) after the API timings", true, mibf, func(r *targetResult) float64 { return float64(r.peakAfterAPI) })
	t.row("Go heap in use (go_memstats_heap_alloc_bytes)", true, mibf, c(func(c *collection) float64 { return c.heap }))
	t.row("freshness, sample time to servable, p50", false, seconds, c(func(c *collection) float64 { return c.fresh50 }))
	t.row("freshness, sample time to servable, p99", false, seconds, c(func(c *collection) float64 { return c.fresh99 }))
	t.row("age of served node samples, median (one list)", false, secs, func(r *targetResult) float64 { return r.age[0].Seconds() })
	t.row("age of served node samples, max (one list)", false, secs, func(r *targetResult) float64 { return r.age[1].Seconds() })
	var others []string
	for _, tr := range t.targets {
		for n := range tr.others {
			if !slices.Contains(others, n) {
				others = append(others, n)
			}
		}
	}
	slices.Sort(others)
	for _, n := range others {
		t.row("  CPU of "+n+" in the same window", false, cpu, func(r *targetResult) float64 { return r.others[n] })
	}
	for _, tr := range t.targets {
		fmt.Fprintf(t.tw, "  load average (1/5/15 min) during %s's window: %s at its start, %s at its end\n", tr.name, tr.coll.loadBefore, tr.coll.loadAfter)
	}
	fmt.Fprintln(t.tw)
	if len(t.targets) == 0 {
		return
	}
	cols := "GET (JSON, uncompressed, sequential)\tvia"
	for _, tr := range t.targets {
		cols += fmt.Sprintf("\t%s p50\tp99\tbytes", tr.name)
	}
	for i := 1; i < len(t.targets); i++ {
		cols += "\tp50 " + ratioLabel(i)
	}
	fmt.Fprintln(t.tw, cols)
	fmt.Fprintln(t.tw, strings.Repeat("-", 36)+"\t---")
	for i, l := range t.targets[0].latencies {
		line := fmt.Sprintf("%s (%d requests)\t%s", l.endpoint, l.n, l.via)
		for _, tr := range t.targets {
			if i < len(tr.latencies) {
				m := tr.latencies[i]
				line += fmt.Sprintf("\t%s\t%s\t%d", msf(m.p50.Seconds()), msf(m.p99.Seconds()), m.bytes)
			}
		}
		for _, tr := range t.targets[1:] {
			if i < len(tr.latencies) && tr.latencies[i].p50 > 0 {
				line += fmt.Sprintf("\t%.2f", float64(l.p50)/float64(tr.latencies[i].p50))
			}
		}
		fmt.Fprintln(t.tw, line)
	}
	fmt.Fprintln(t.tw)
}

func mibf(v float64) string { return mib(v) }

func (r *result) printLoad(t table) {
	o := r.opts
	fmt.Fprintln(t.tw)
	fmt.Fprintf(t.tw, "load: %d clients (one connection each) list all %d pods via %s for %s, JSON, uncompressed\n",
		o.loadClients, o.nodes*o.pods, o.loadVia, o.loadDuration)
	t.header("load measure")
	l := func(f func(*loadResult) float64) func(*targetResult) float64 {
		return func(r *targetResult) float64 {
			if r.load == nil {
				return math.NaN()
			}
			return f(r.load)
		}
	}
	t.row("requests answered", true, count, l(func(l *loadResult) float64 { return float64(l.requests) }))
	t.row("throughput", true, func(v float64) string { return fmt.Sprintf("%.2f lists/s", v) },
		l(func(l *loadResult) float64 { return float64(l.requests) / l.elapsed.Seconds() }))
	t.row("errors (no answer, or not 200)", false, count, l(func(l *loadResult) float64 { return float64(l.errors) }))
	t.row("incomplete lists (200 without every pod)", false, count, l(func(l *loadResult) float64 { return float64(l.incomplete) }))
	t.row("latency p50", true, secs, l(func(l *loadResult) float64 { return l.p50.Seconds() }))
	t.row("latency p99", true, secs, l(func(l *loadResult) float64 { return l.p99.Seconds() }))
	t.row("latency max", true, secs, l(func(l *loadResult) float64 { return l.max.Seconds() }))
	t.row("bytes of a complete answer", false, count, l(func(l *loadResult) float64 { return float64(l.bytes) }))
	t.row("elapsed (first request to last answer)", false, secs, l(func(l *loadResult) float64 { return l.elapsed.Seconds() }))
	t.row("collection cycles in it", false, count, l(func(l *loadResult) float64 { return l.coll.cycles }))
	t.row("  intervals in it", false, count, l(func(l *loadResult) float64 { return l.expectedCycles }))
	t.row("cycle duration, mean", true, seconds, l(func(l *loadResult) float64 { return l.coll.cycleMean }))
	t.row("cycle duration, p99 (histogram)", false, seconds, l(func(l *loadResult) float64 { return l.coll.cycleP99 }))
	t.row("failed kubelet requests in it", false, count, l(func(l *loadResult) float64 { return l.coll.failuresInWindow }))
	t.row("collection kept its interval", false, yesNo, l(func(l *loadResult) float64 {
		return keptInterval(l.coll, l.expectedCycles, o.resolution)
	}))
	t.row("CPU during the load", true, cpu, l(func(l *loadResult) float64 { return l.coll.cpuPerMin }))
	t.row("RSS before the load", true, mibf, l(func(l *loadResult) float64 { return float64(l.rssStart) }))
	t.row("RSS, max sampled every 0.5 s", true, mibf, l(func(l *loadResult) float64 { return float64(l.rssMax) }))
	t.row("RSS after the load", true, mibf, l(func(l *loadResult) float64 { return float64(l.rssEnd) }))
	hwm := "peak RSS (VmHWM) since start"
	if len(t.targets) > 0 && t.targets[0].load != nil && t.targets[0].load.hwmReset {
		hwm = "peak RSS (VmHWM) during the load"
	}
	t.row(hwm, true, mibf, l(func(l *loadResult) float64 { return float64(l.hwm) }))
	t.row("Go heap in use after", true, mibf, l(func(l *loadResult) float64 { return l.coll.heap }))
	for _, tr := range t.targets {
		if tr.load == nil {
			continue
		}
		t.footnote(tr.name, tr.load.coll, tr.load.errorKinds)
	}
}

// footnote prints a phase's load average and its failures by kind, for one target.
func (t table) footnote(name string, c collection, failures map[string]int) {
	fmt.Fprintf(t.tw, "  %s: load average %s at the start, %s at the end", name, c.loadBefore, c.loadAfter)
	kinds := make([]string, 0, len(failures))
	for k, n := range failures {
		kinds = append(kinds, fmt.Sprintf("%dx %s", n, k))
	}
	slices.Sort(kinds)
	if len(kinds) > 0 {
		fmt.Fprintf(t.tw, "; failures: %s", strings.Join(kinds, "; "))
	}
	fmt.Fprintln(t.tw)
}
