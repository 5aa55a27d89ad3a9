package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"k8s.io/apimachinery/pkg/types"
)

// soakResult is one server's soak window (issue 29 item 3).
type soakResult struct {
	samples            []memSample
	coll               collection // CPU over the window, and what the server's metrics say of it
	others             map[string]float64
	hpa50, hpa99       float64 // the server's latency of namespaced pod lists: the HPA controller's
	hpaListsPerSec     float64
	failedMetric       int            // FailedGetResourceMetric events in the window
	failedMetricCauses map[string]int // their messages, names left out
	failedSyncs        syncFailures   // the HPA controller's failed syncs logged in the window (hpalog.go)
	hpa                hpaCheck
	top                topTally
	probes             probeResult
	churn              churnTally
	sampleErrors       int
	profileWarm        string   // at the end of the warm-up: the slopes' window is between it and profileEnd
	profilesErr        error    // why profileWarm or the next of profileBetween was not saved
	profileBetween     []string // every -soak-heap-profile-every between profileWarm and profileEnd
	profileEnd         string
	profileCPU         string // a CPU profile from the middle of the window
	profileCPUErr      error
	warmup, duration   time.Duration
}

// memSampleEvery is the soak's memory sampling period: 360 samples an hour, enough to see the collector's rhythm.
const memSampleEvery = 10 * time.Second

// runSoak runs one server's soak window: churn, the HPA fleet's syncs, a `kubectl top pods -A` and value checks
// every -soak-top-every, memory every 10 s; then brings back any node that left.
func (e *benchEnv) runSoak(ctx context.Context, t target, b *framework.Backend, direct *http.Client) (*soakResult, error) {
	o := e.opts
	r := &soakResult{warmup: o.soakWarmup, top: topTally{errors: map[string]int{}}}
	fmt.Fprintf(os.Stderr, "%s: soak for %s: %.1f pods replaced and %.1f containers restarted a second, a node leaving every %s, %d HPAs...\n",
		t.name, o.soakFor(t), o.churnPerSec, o.restartsSec, o.nodeChurnEvery, o.hpa)
	procs := e.others(b.Proc)
	before := readProcs(procs)
	m0, err := scrapeMetrics(ctx, direct, b.URL())
	if err != nil {
		return nil, err
	}
	var ev0 map[types.UID]eventCount
	if o.hpa > 0 {
		if ev0, err = failedMetricEvents(ctx, e.client); err != nil {
			return nil, err
		}
	}
	s0, err := b.Proc.Stat()
	if err != nil {
		return nil, err
	}
	r.coll.loadBefore = loadAvg()
	start := time.Now()
	until := start.Add(o.soakFor(t))
	tr := newTracker(direct, b.URL(), o.resolution, o.soakTrack)
	var ch *churner
	var wg sync.WaitGroup
	if o.churnPerSec > 0 {
		ch = e.newSoakChurner()
		ch.tr = tr
		wg.Go(func() { ch.run(ctx, until, o.churn(), o.restartsSec, o.nodeChurnEvery) })
		wg.Go(func() { tr.run(ctx, until) })
	}
	wg.Go(func() { r.samples, r.sampleErrors = sampleMemory(ctx, b, direct, procs, start, until) })
	wg.Go(func() { r.profileCPU, r.profileCPUErr = e.soakCPUProfile(ctx, t, b, direct, start, until) })
	wg.Go(func() {
		r.profileWarm, r.profileBetween, r.profilesErr = e.soakWarmProfiles(ctx, t, b, direct, start, until)
	})
	e.checkEvery(ctx, start, until, r)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.duration = time.Since(start)
	s1, err := b.Proc.Stat()
	if err != nil {
		return nil, err
	}
	minutes := r.duration.Minutes()
	r.coll.window, r.coll.cpuPerMin, r.coll.rss, r.coll.peakRSS = r.duration, (s1.CPU-s0.CPU).Seconds()/minutes, s1.RSS, s1.PeakRSS
	r.coll.loadAfter = loadAvg()
	r.others = cpuSince(procs, before, minutes)
	m1, err := scrapeMetrics(ctx, direct, b.URL())
	if err != nil {
		return nil, err
	}
	r.coll.cycleStats(t, m0, m1)
	const dur = "apiserver_request_duration_seconds"
	hpaLists := []string{`resource="pods"`, `verb="LIST"`, `group="metrics.k8s.io"`, `scope="namespace"`}
	r.hpa50 = histogramQuantileWhere(m0, m1, dur, 0.5, hpaLists...)
	r.hpa99 = histogramQuantileWhere(m0, m1, dur, 0.99, hpaLists...)
	r.hpaListsPerSec = (m1.sumWhere(dur+"_count", hpaLists...) - m0.sumWhere(dur+"_count", hpaLists...)) / r.duration.Seconds()
	if o.hpa > 0 {
		ev1, err := failedMetricEvents(ctx, e.client)
		if err != nil {
			return nil, err
		}
		r.failedMetric, r.failedMetricCauses = eventsBetween(ev0, ev1)
		log := filepath.Join(e.cp.Dir, "kube-controller-manager.log")
		if r.failedSyncs, err = failedSyncs(log, start, start.Add(r.duration)); err != nil {
			return nil, err
		}
	}
	if r.profileEnd, err = e.soakProfile(ctx, t, b, direct, "end"); err != nil {
		return nil, err
	}
	r.probes = tr.result()
	if ch != nil {
		r.churn = ch.result()
		ch.restoreNodes(ctx) // the next server starts on the whole cluster
	}
	return r, nil
}

// newSoakChurner churns for one soak window, through the run's Planner.
func (e *benchEnv) newSoakChurner() *churner {
	return newChurner(e.sim, e.planner, e.client, e.forward)
}

// checkEvery runs `kubectl top pods -A` and the HPA check every -soak-top-every until until.
func (e *benchEnv) checkEvery(ctx context.Context, start, until time.Time, r *soakResult) {
	o := e.opts
	for next := start.Add(o.soakTopEvery); next.Before(until); next = next.Add(o.soakTopEvery) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		r.top.add(runTop(ctx, e.cp, e.sim, 3*o.resolution))
		if o.hpa > 0 {
			h, err := checkHPAs(ctx, e.client, e.sim, o.containers)
			if err != nil {
				r.top.errors["HPA check: "+errKind(err)]++
			}
			r.hpa.add(h)
		}
	}
}

// sampleMemory reads b's RSS and Go heap every memSampleEvery from start until until, and the CPU of b and of
// the others (procs) since the previous sample.
func sampleMemory(ctx context.Context, b *framework.Backend, hc *http.Client, procs map[string]int, start, until time.Time) ([]memSample, int) {
	var out []memSample
	errs := 0
	var cpu cpuRates
	for at := start; at.Before(until); at = at.Add(memSampleEvery) {
		select {
		case <-ctx.Done():
			return out, errs
		case <-time.After(time.Until(at)):
		}
		st, err := b.Proc.Stat()
		if err != nil {
			errs++
			continue
		}
		s := memSample{at: time.Since(start), rss: float64(st.RSS), anon: float64(st.RSSAnon),
			file: float64(st.RSSFile), heap: math.NaN(), goroutines: math.NaN(), pods: math.NaN(), parts: noHeapParts,
			carried: carried{load1: loadAvg1(), reads: math.NaN(), answers: math.NaN(), keptBuild: math.NaN()}}
		s.carried.serverCores, s.carried.othersCores = cpu.next(time.Now(), st.CPU, readProcs(procs))
		if m, err := scrapeMetrics(ctx, hc, b.URL()); err == nil {
			s.parts = readHeapParts(m)
			read := carriedMetrics(&s.carried)
			read["go_memstats_heap_inuse_bytes"], read["go_goroutines"] = &s.heap, &s.goroutines
			read[`metrics_ring_storage_objects{kind="pod"}`] = &s.pods
			for name, v := range read {
				if got, ok := m[name]; ok {
					*v = got
				}
			}
		} else {
			errs++
		}
		out = append(out, s)
	}
	return out, errs
}

// soakProfile saves a heap profile of our server into -soak-heap-profiles, when asked, after a garbage collection
// (gc=1): what is in use then, not at the last collection, so that two profiles' difference is what stayed; and
// its goroutines (WHEN.goroutines).
func (e *benchEnv) soakProfile(ctx context.Context, t target, b *framework.Backend, hc *http.Client, when string) (string, error) {
	if e.opts.soakProfiles == "" || !t.profiles {
		return "", nil
	}
	if err := os.MkdirAll(e.opts.soakProfiles, 0o755); err != nil {
		return "", err
	}
	prefix := filepath.Join(e.opts.soakProfiles, strings.ReplaceAll(t.name, " ", "-")+"-"+when)
	// The goroutines too, beside the heap (pprof's proto: `go tool pprof -base` diffs them by stack), for a
	// goroutine count that grows.
	if err := saveProfile(ctx, hc, b.URL()+"/debug/pprof/goroutine", prefix+".goroutines"); err != nil {
		return "", err
	}
	return prefix + ".heap", saveProfile(ctx, hc, b.URL()+"/debug/pprof/heap?gc=1", prefix+".heap")
}

// soakWarmProfiles saves the heap profile of the warm-up's end (soakProfile), where the slopes begin, then one
// every -soak-heap-profile-every: two profiles cannot tell a site that keeps growing from one that stepped once.
func (e *benchEnv) soakWarmProfiles(ctx context.Context, t target, b *framework.Backend, hc *http.Client, start, until time.Time) (string, []string, error) {
	if e.opts.soakProfiles == "" || !t.profiles {
		return "", nil, nil
	}
	var warm string
	var between []string
	for i, at := range profileTimes(until.Sub(start), e.opts.soakWarmup, e.opts.soakProfileEvery) {
		select {
		case <-ctx.Done():
			return warm, between, ctx.Err()
		case <-time.After(time.Until(start.Add(at))):
		}
		when := "warm"
		if i > 0 {
			when = fmt.Sprintf("m%03d", int(at.Minutes()))
		}
		file, err := e.soakProfile(ctx, t, b, hc, when)
		if err != nil {
			return warm, between, err
		}
		if i == 0 {
			warm = file
		} else {
			between = append(between, file)
		}
	}
	return warm, between, nil
}

// profileTimes are when, from a window's start, soakWarmProfiles saves heap profiles: at the warm-up's end (at
// most half the window), then every every (none when 0) while at least half of every is left before the end's.
func profileTimes(window, warmup, every time.Duration) []time.Duration {
	at := []time.Duration{min(warmup, window/2)}
	for every > 0 {
		next := at[len(at)-1] + every
		if next > window-every/2 {
			break
		}
		at = append(at, next)
	}
	return at
}

// soakCPUProfile saves a CPU profile of our server into -soak-heap-profiles, when asked: 60 s (less in a short
// window) centred in the window after warm-up, where the churn and the HPA fleet are steady. The profiler's own
// cost counts in the window's CPU.
func (e *benchEnv) soakCPUProfile(ctx context.Context, t target, b *framework.Backend, hc *http.Client, start, until time.Time) (string, error) {
	if e.opts.soakProfiles == "" || !t.profiles {
		return "", nil
	}
	d := min(time.Minute, until.Sub(start)/4)
	warm := min(e.opts.soakWarmup, until.Sub(start)/2)
	at := start.Add(warm + (until.Sub(start)-warm-d)/2)
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(time.Until(at)):
	}
	if err := os.MkdirAll(e.opts.soakProfiles, 0o755); err != nil {
		return "", err
	}
	url, _ := cpuProfileURL(b.URL(), d)
	file := filepath.Join(e.opts.soakProfiles, strings.ReplaceAll(t.name, " ", "-")+"-mid.cpu")
	return file, saveProfile(ctx, hc, url, file)
}

// readProcs reads the CPU time of each named process.
func readProcs(procs map[string]int) map[string]framework.ProcStat {
	out := map[string]framework.ProcStat{}
	for name, pid := range procs {
		if st, err := framework.ReadProcStat(pid); err == nil {
			out[name] = st
		}
	}
	return out
}

// cpuSince is each process's CPU-s a minute since before.
func cpuSince(procs map[string]int, before map[string]framework.ProcStat, minutes float64) map[string]float64 {
	out := map[string]float64{}
	for name, st := range readProcs(procs) {
		out[name] = (st.CPU - before[name].CPU).Seconds() / minutes
	}
	return out
}

// cpuRates turns cumulative CPU times read at each sample into cores used since the previous one.
type cpuRates struct {
	at     time.Time
	server time.Duration
	others map[string]framework.ProcStat
}

// next returns the server's and the others' cores since the previous call (NaN at the first), given their CPU at
// now. A process counts only when read both times with its CPU not gone back (not restarted), so that one whose
// stat was unreadable once, or a new process, adds no jump (it drops out of the intervals around it); with none
// counted, the others' cores are NaN, not an idle machine.
func (c *cpuRates) next(now time.Time, server time.Duration, others map[string]framework.ProcStat) (serverCores, othersCores float64) {
	serverCores, othersCores = math.NaN(), math.NaN()
	if wall := now.Sub(c.at).Seconds(); !c.at.IsZero() && wall > 0 {
		serverCores = (server - c.server).Seconds() / wall
		var sum time.Duration
		counted := 0
		for name, st := range others {
			if prev, ok := c.others[name]; ok && st.CPU >= prev.CPU {
				sum += st.CPU - prev.CPU
				counted++
			}
		}
		if counted > 0 {
			othersCores = sum.Seconds() / wall
		}
	}
	c.at, c.server, c.others = now, server, others
	return serverCores, othersCores
}
