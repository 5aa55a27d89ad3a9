package main

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// printSoak prints the soak's table (issue 29 item 3): one column per server, ratios where they mean something.
func (r *result) printSoak(t table) {
	o := r.opts
	fmt.Fprintln(t.tw)
	fmt.Fprintf(t.tw, "soak: %s; churn %.1f pods replaced%s and %.1f containers restarted a second, a node leaving every %s; %d HPAs (%d pods each, %s sync, %d concurrent syncs); `kubectl top pods -A` every %s; slopes after the first %s\n",
		o.soakWindows(), o.churnPerSec, o.warmupChurnNote(), o.restartsSec, o.nodeChurnEvery, o.hpa, o.hpaPods, o.hpaSyncPeriod, o.hpaSyncsOrAuto(), o.soakTopEvery, o.soakWarmup)
	t.header("soak measure")
	s := soakValue
	num := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	cyc := func(v float64) string { return fmt.Sprintf("%.2f cycles", v) }
	rss := func(x *soakResult) []memSample { return x.samples }
	t.row("pods replaced / containers restarted", false, num, s(func(x *soakResult) float64 { return float64(x.churn.replaced) }))
	t.row("  restarts", false, num, s(func(x *soakResult) float64 { return float64(x.churn.restarted) }))
	t.row("  nodes that left", false, num, s(func(x *soakResult) float64 { return float64(x.churn.nodesDown) }))
	t.row("RSS at the start of the soak", true, mibf, s(func(x *soakResult) float64 { return first(rss(x)).rss }))
	t.row("RSS at the end", true, mibf, s(func(x *soakResult) float64 { return last(rss(x)).rss }))
	t.row("RSS mean after warm-up", true, mibf, s(func(x *soakResult) float64 { return meanRSS(x.samples, x.warmup) }))
	// slopeOf is the slope after warm-up of v over every 10 s sample.
	slopeOf := func(v func(memSample) float64) func(*soakResult) float64 {
		return func(x *soakResult) float64 { return slopePerHour(x.samples, x.warmup, v) }
	}
	rssMiB := func(m memSample) float64 { return m.rss / (1 << 20) }
	slope := slopeOf(rssMiB)
	minSlope := func(x *soakResult) float64 { return slopePerHour(minuteMinima(x.samples), x.warmup, rssMiB) }
	t.row("RSS slope after warm-up (10 s samples)", false, mibPerHour, s(slope))
	t.row("  of the mean RSS, per hour", false, percent, s(func(x *soakResult) float64 { return slope(x) * (1 << 20) / meanRSS(x.samples, x.warmup) * 100 }))
	printSlopeInterval(t, rssMiB)
	// A leak keeps its slope through the window; a floor settling, or a swing of the load, does not.
	t.row("  over the window's second half only", false, mibPerHour, s(func(x *soakResult) float64 {
		return slopePerHour(x.samples, x.warmup+(x.duration-x.warmup)/2, rssMiB)
	}))
	t.row("RSS slope of each minute's lowest", false, mibPerHour, s(minSlope))
	t.row("  of the mean RSS, per hour", false, percent, s(func(x *soakResult) float64 { return minSlope(x) * (1 << 20) / meanRSS(x.samples, x.warmup) * 100 }))
	// A leak grows anonymous memory; the executable's pages touched (RssFile) grow as code first runs, up to the
	// binary's size, whatever the load.
	t.row("  anonymous (RssAnon) slope, 10 s samples", false, mibPerHour, s(slopeOf(func(m memSample) float64 { return m.anon / (1 << 20) })))
	t.row("  file-backed (RssFile) slope, 10 s samples", false, mibPerHour, s(slopeOf(func(m memSample) float64 { return m.file / (1 << 20) })))
	t.row("RssAnon at the end", true, mibf, s(func(x *soakResult) float64 { return last(rss(x)).anon }))
	t.row("RssFile at the end", true, mibf, s(func(x *soakResult) float64 { return last(rss(x)).file }))
	t.row("Go heap in use slope after warm-up", false, mibPerHour, s(slopeOf(func(m memSample) float64 { return m.heap / (1 << 20) })))
	// The runtime's account of its memory: the live heap's slope is a leak's; the others' are what the runtime
	// keeps around it.
	for _, part := range heapPartsMetrics {
		value := func(m memSample) float64 { return *part.field(&m.parts) }
		t.row("  "+part.label+": mean after warm-up", true, mibf, s(func(x *soakResult) float64 { return meanOf(x.samples, x.warmup, value) }))
		t.row("    its slope after warm-up", false, mibPerHour, s(slopeOf(func(m memSample) float64 { return value(m) / (1 << 20) })))
	}
	printCarried(t)
	perHour := func(v float64) string {
		if math.IsNaN(v) {
			return "not served"
		}
		return fmt.Sprintf("%+.0f /h", v)
	}
	t.row("goroutines slope after warm-up", false, perHour, s(slopeOf(func(m memSample) float64 { return m.goroutines })))
	t.row("pods in storage slope after warm-up", false, perHour, s(slopeOf(func(m memSample) float64 { return m.pods })))
	t.row("CPU over the soak", true, cpu, s(func(x *soakResult) float64 { return x.coll.cpuPerMin }))
	t.row("HPA lists a second (server's count)", false, func(v float64) string { return fmt.Sprintf("%.1f", v) }, s(func(x *soakResult) float64 { return x.hpaListsPerSec }))
	// The whole server's CPU (collection too) over the lists it answered: a server that answers fewer lists under
	// the same HPA fleet (slower syncs) spends less on them; this row puts the two on one scale.
	t.row("  CPU-ms per HPA list answered", true, func(v float64) string { return fmt.Sprintf("%.2f ms", v) }, s(func(x *soakResult) float64 {
		return x.coll.cpuPerMin * 1000 / 60 / x.hpaListsPerSec
	}))
	t.row("HPA list latency p50 (server's histogram)", true, seconds, s(func(x *soakResult) float64 { return x.hpa50 }))
	t.row("HPA list latency p99 (server's histogram)", true, seconds, s(func(x *soakResult) float64 { return x.hpa99 }))
	t.row("FailedGetResourceMetric events", false, num, s(func(x *soakResult) float64 { return float64(x.failedMetric) }))
	t.row("HPA syncs failed in the window (controller's log)", false, num, s(func(x *soakResult) float64 { return float64(x.failedSyncs.n) }))
	t.row("HPA status vs truth: checks", false, num, s(func(x *soakResult) float64 { return float64(x.hpa.checks) }))
	t.row("  agree / differ / no current metric", false, num, s(func(x *soakResult) float64 { return float64(x.hpa.agree) }))
	t.row("  differ", false, num, s(func(x *soakResult) float64 { return float64(x.hpa.off) }))
	t.row("  no current metric", false, num, s(func(x *soakResult) float64 { return float64(x.hpa.none) }))
	t.row("  largest difference (points)", false, func(v float64) string { return fmt.Sprintf("%.1f", v) }, s(func(x *soakResult) float64 { return x.hpa.maxOff }))
	t.row("new pods probed until served", false, num, s(func(x *soakResult) float64 { return float64(len(x.probes.toServe)) }))
	t.row("  time to be served p50", true, cyc, s(func(x *soakResult) float64 { return x.probes.cycles(0.5, o.resolution) }))
	t.row("  time to be served p99", true, cyc, s(func(x *soakResult) float64 { return x.probes.cycles(0.99, o.resolution) }))
	t.row("  not served within 6 cycles", false, num, s(func(x *soakResult) float64 { return float64(x.probes.neverServed) }))
	t.row("  not probed (over -soak-track)", false, num, s(func(x *soakResult) float64 { return float64(x.probes.newUntracked) }))
	t.row("deleted pods probed", false, num, s(func(x *soakResult) float64 { return float64(x.probes.deletedSeen) }))
	t.row("  served 1 s or more after their deletion", false, num, s(func(x *soakResult) float64 { return float64(x.probes.servedAfterDeletion) }))
	t.row("  longest served after deletion", false, secs, s(func(x *soakResult) float64 { return x.probes.maxServedAfter.Seconds() }))
	t.row("kubectl top pods -A: runs / failed", false, num, s(func(x *soakResult) float64 { return float64(x.top.runs) }))
	t.row("  failed", false, num, s(func(x *soakResult) float64 { return float64(x.top.failed) }))
	t.row("  slowest", true, secs, s(func(x *soakResult) float64 { return x.top.maxTook.Seconds() }))
	t.row("  rows: wrong values / missing / deleted", false, num, s(func(x *soakResult) float64 { return float64(x.top.wrong) }))
	t.row("  missing", false, num, s(func(x *soakResult) float64 { return float64(x.top.missing) }))
	t.row("  deleted pods shown", false, num, s(func(x *soakResult) float64 { return float64(x.top.extra) }))
	t.row("kubelet requests failed in the soak", false, num, s(func(x *soakResult) float64 { return x.coll.failuresInWindow }))
	for _, tr := range t.targets {
		if tr.soak == nil {
			continue
		}
		x := tr.soak
		errs := map[string]int{}
		for k, n := range x.churn.errors {
			errs["churn "+k] += n
		}
		for k, n := range x.probes.errors {
			errs["probe "+k] += n
		}
		for k, n := range x.top.errors {
			errs[k] += n
		}
		if x.sampleErrors > 0 {
			errs["memory samples"] += x.sampleErrors
		}
		t.footnote(tr.name+" soak", x.coll, errs)
		if x.top.example != "" {
			fmt.Fprintf(t.tw, "  %s: first disagreement of kubectl top with the truth: %s\n", tr.name, x.top.example)
		}
		for _, c := range mostCounted(x.failedMetricCauses, 3) {
			fmt.Fprintf(t.tw, "  %s: FailedGetResourceMetric x%d: %s\n", tr.name, x.failedMetricCauses[c], c)
		}
		for _, c := range mostCounted(x.failedSyncs.causes, 3) {
			fmt.Fprintf(t.tw, "  %s: failed HPA sync x%d: %s\n", tr.name, x.failedSyncs.causes[c], c)
		}
		if n := len(x.failedSyncs.targets); n > 0 || x.failedSyncs.untargeted > 0 {
			worst := mostCounted(x.failedSyncs.targets, 3)
			most := ""
			if n > 0 {
				most = "; the most: " + strings.Join(countedNames(x.failedSyncs.targets, worst), ", ")
			}
			fmt.Fprintf(t.tw, "  %s: failed HPA syncs came from %d HPAs (and %d named none)%s\n", tr.name, n,
				x.failedSyncs.untargeted, most)
			fmt.Fprintf(t.tw, "  %s: failed HPA syncs by minute of the window: %s\n", tr.name, minutesOf(x.failedSyncs.byMinute))
		}
		for _, l := range heapProfileLines(tr.name, x) {
			fmt.Fprintln(t.tw, l)
		}
		switch {
		case x.profileCPUErr != nil:
			fmt.Fprintf(t.tw, "  %s: no CPU profile: %v\n", tr.name, x.profileCPUErr)
		case x.profileCPU != "":
			fmt.Fprintf(t.tw, "  %s: CPU profile from the middle of the window %s\n", tr.name, x.profileCPU)
		}
		others := make([]string, 0, len(x.others))
		for name, v := range x.others {
			others = append(others, fmt.Sprintf("%s %.2f", name, v))
		}
		slices.Sort(others)
		fmt.Fprintf(t.tw, "  %s soak, CPU-s/min of the others: %s\n", tr.name, strings.Join(others, ", "))
	}
}

func first(s []memSample) memSample {
	if len(s) == 0 {
		return memSample{rss: math.NaN(), anon: math.NaN(), file: math.NaN()}
	}
	return s[0]
}

func last(s []memSample) memSample {
	if len(s) == 0 {
		return memSample{rss: math.NaN(), anon: math.NaN(), file: math.NaN()}
	}
	return s[len(s)-1]
}

// plotColors tell the servers apart; RSS is drawn solid and the Go heap dashed in the server's color.
var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

// writeSoakPlot writes RSS and Go heap over time of every server's soak to -soak-plot.
func (r *result) writeSoakPlot() error {
	o := r.opts
	if o.soak == 0 {
		return nil
	}
	var lines []plotLine
	for i, tr := range r.targets {
		if tr.soak == nil {
			continue
		}
		color := plotColors[i%len(plotColors)]
		rss := plotLine{name: tr.name + " RSS", color: color}
		heap := plotLine{name: tr.name + " Go heap in use", color: color, dashed: true}
		for _, s := range tr.soak.samples {
			x := s.at.Minutes()
			rss.points = append(rss.points, [2]float64{x, s.rss / (1 << 20)})
			if !math.IsNaN(s.heap) {
				heap.points = append(heap.points, [2]float64{x, s.heap / (1 << 20)})
			}
		}
		lines = append(lines, rss, heap)
	}
	if err := os.MkdirAll(filepath.Dir(o.soakPlot), 0o755); err != nil {
		return err
	}
	f, err := os.Create(o.soakPlot)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("soak: %d nodes x %d pods%s, %.0f pods/s replaced, %d HPAs, %s", o.nodes, o.pods,
		o.spreadNote(), o.churnPerSec, o.hpa, o.soakWindows())
	if err := writePlot(f, title, lines); err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(os.Stderr, "soak plot written to %s\n", o.soakPlot)
	return f.Close()
}

// mostCounted are the n keys of counts counted most (a cause, an HPA), most first.
func mostCounted(counts map[string]int, n int) []string {
	out := make([]string, 0, len(counts))
	for c := range counts {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	return out[:min(n, len(out))]
}

// countedNames is each of names with its count in counts ("name x3").
func countedNames(counts map[string]int, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%s x%d", n, counts[n])
	}
	return out
}

// minutesOf is counts by minute, in order ("12: 3, 40: 480").
func minutesOf(byMinute map[int]int) string {
	ms := slices.Sorted(maps.Keys(byMinute))
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%d: %d", m, byMinute[m])
	}
	return strings.Join(out, ", ")
}

// heapProfileLines say where server name's heap profiles are, or why they stopped: at the warm-up's end, or at a
// profile between it and the end's.
func heapProfileLines(name string, x *soakResult) []string {
	if x.profileWarm == "" {
		if x.profilesErr != nil {
			return []string{fmt.Sprintf("  %s: no heap profile at the warm-up's end: %v", name, x.profilesErr)}
		}
		return nil
	}
	out := []string{fmt.Sprintf("  %s: heap profiles %s (the warm-up's end) and %s", name, x.profileWarm, x.profileEnd)}
	if len(x.profileBetween) > 0 {
		out = append(out, fmt.Sprintf("  %s: heap profiles between them: %s", name, strings.Join(x.profileBetween, " ")))
	}
	if x.profilesErr != nil {
		out = append(out, fmt.Sprintf("  %s: heap profiles between them stopped after %d: %v", name, len(x.profileBetween), x.profilesErr))
	}
	return out
}

// soakValue reads f of a target's soak (NaN for a target that had none).
func soakValue(f func(*soakResult) float64) func(*targetResult) float64 {
	return func(tr *targetResult) float64 {
		if tr.soak == nil {
			return math.NaN()
		}
		return f(tr.soak)
	}
}

// printSlopeInterval prints v's slope fitted to 5-minute means and its 95 % interval, absolute and of the mean RSS.
func printSlopeInterval(t table, v func(memSample) float64) {
	// The fit's own error: whether the run is long enough to tell its slope from the swings of what the collector
	// marks (a slope inside its interval's reach of the goal is not a measured miss, nor a met goal).
	interval := func(x *soakResult) (float64, float64) { return slopeInterval(x.samples, x.warmup, slopeBlock, v) }
	t.row("  fitted to 5-minute means", false, mibPerHour, soakValue(func(x *soakResult) float64 { v, _ := interval(x); return v }))
	t.row("    ± its 95 % interval", false, func(v float64) string { return fmt.Sprintf("±%.1f MiB/h", v) }, soakValue(func(x *soakResult) float64 { _, h := interval(x); return h }))
	t.row("    its lower end, of the mean RSS per hour", false, percent, soakValue(func(x *soakResult) float64 {
		v, h := interval(x)
		return (v - h) * (1 << 20) / meanRSS(x.samples, x.warmup) * 100
	}))
	t.row("    its upper end, of the mean RSS per hour", false, percent, soakValue(func(x *soakResult) float64 {
		v, h := interval(x)
		return (v + h) * (1 << 20) / meanRSS(x.samples, x.warmup) * 100
	}))
}

// mibPerHour formats a slope in MiB an hour; percent one of the mean RSS, in % an hour.
func mibPerHour(v float64) string { return fmt.Sprintf("%+.1f MiB/h", v) }
func percent(v float64) string    { return fmt.Sprintf("%+.2f %%", v) }
