package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// readersResult is one reader phase (issue 14): watchers of every pod and clients paging through every pod, at
// once, for a bounded time.
type readersResult struct {
	elapsed        time.Duration // start to deadline, or to the RSS limit
	capped         bool          // RSS passed -readers-rss-limit and the phase was cut short
	rssIdle        uint64
	rssPeak        uint64
	hwmReset       bool // rssPeak includes VmHWM, reset at the start, not only 0.5 s samples
	collections    uint64
	expectedCycles float64
	coll           collection

	watchersOpen, caughtUp, behind, ended   int
	eventsMin, eventsMedian, dueMedian      int
	pages, throughs, short, errors, tooMany int
	pageP50, pageP99                        time.Duration
	failures                                map[string]int
}

// readersGrace is how long watchers are given after the deadline to receive the events of the collections that
// landed before it: one resolution, i.e. every collection's events before the next collection.
func readersGrace(o options) time.Duration { return o.resolution }

// runReaders waits one resolution with no API load and takes the idle RSS; then o.readersWatchers clients watch
// every pod and o.readersPagers page through every pod, o.readersPageSize a page, for o.readersDuration, each
// on its own connection. After the deadline the pagers stop and the watchers get readersGrace to receive the
// collections up to the newest at the deadline. RSS is sampled every 0.5 s (and the kernel's high-water mark
// reset at the start, where it may be); above o.readersRSSLimit every client stops at once.
func runReaders(ctx context.Context, o options, t target, b *framework.Backend, direct *http.Client, base string,
	newClient func(time.Duration) (*http.Client, error)) (*readersResult, error) {
	r := &readersResult{failures: map[string]int{}}
	pods := o.nodes * o.pods
	timeout := o.readersDuration + readersGrace(o) + time.Minute
	clients := make([]*http.Client, o.readersWatchers+o.readersPagers)
	for i := range clients {
		hc, err := newClient(timeout)
		if err != nil {
			return nil, err
		}
		clients[i] = hc
	}
	fmt.Fprintf(os.Stderr, "%s: readers: idle for %s, then %d watchers of all %d pods and %d clients paging through them %d at a time via %s for %s...\n",
		t.name, o.resolution, o.readersWatchers, pods, o.readersPagers, o.readersPageSize, o.loadVia, o.readersDuration)
	pause(ctx, o.resolution)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r.hwmReset = resetPeakRSS(b.Proc.Pid())
	s0, m0, err := observe(ctx, b, direct)
	if err != nil {
		return nil, err
	}
	r.rssIdle, r.coll.loadBefore = s0.RSS, loadAvg()
	gen0, err := generation(ctx, direct, b.URL())
	if err != nil {
		return nil, err
	}

	// Everything below ends by pctx: the phase, the grace, and a minute for requests in flight; or the RSS limit.
	pctx, stopAll := context.WithTimeout(ctx, timeout)
	defer stopAll()
	var capped atomic.Bool
	rss := sampleRSS(pctx, b, func(v uint64) {
		if v > o.readersRSSLimit {
			capped.Store(true)
			stopAll()
		}
	})

	start := time.Now()
	deadline := start.Add(o.readersDuration)
	var endGen atomic.Uint64
	var budget atomic.Int64
	budget.Store(int64(o.readersMaxPages))
	watchURL := fmt.Sprintf("%s%s?watch=true&timeoutSeconds=%d", base, podsPath, int(timeout.Seconds()))
	tallies := make([]*watchTally, o.readersWatchers)
	pagers := make([]*pageTally, o.readersPagers)
	var watchers, paging sync.WaitGroup
	for i := range tallies {
		watchers.Go(func() { tallies[i] = watchPods(pctx, clients[i], watchURL, gen0, pods, &endGen) })
	}
	for i := range pagers {
		paging.Go(func() {
			pagers[i] = pagePods(pctx, clients[o.readersWatchers+i], base, o.readersPageSize, pods, deadline, &budget)
		})
	}
	pause(pctx, time.Until(deadline))
	paging.Wait()
	r.elapsed = time.Since(start)
	// The window of collection and CPU figures is the phase itself, not the grace after it.
	s1, m1, err := observe(ctx, b, direct)
	if err != nil {
		return nil, err
	}
	gen1, err := generation(ctx, direct, b.URL())
	if err != nil {
		return nil, err
	}
	endGen.Store(gen1)
	if !capped.Load() {
		watchersDone := make(chan struct{})
		go func() { watchers.Wait(); close(watchersDone) }()
		select {
		case <-watchersDone:
		case <-pctx.Done():
		case <-time.After(readersGrace(o)):
		}
	}
	stopAll()
	watchers.Wait()
	rssMax := rss.stop()
	s2, err := b.Proc.Stat()
	if err != nil {
		return nil, err
	}
	r.capped, r.collections = capped.Load(), gen1-gen0
	r.rssPeak = max(rssMax, s1.RSS, s2.RSS)
	if r.hwmReset {
		r.rssPeak = max(r.rssPeak, s2.PeakRSS)
	}
	r.coll.window, r.coll.loadAfter = r.elapsed, loadAvg()
	r.coll.cpuPerMin = (s1.CPU - s0.CPU).Seconds() / r.elapsed.Minutes()
	r.coll.rss, r.coll.peakRSS = s1.RSS, s1.PeakRSS
	r.coll.cycleStats(t, m0, m1)
	r.expectedCycles = float64(int(r.elapsed / o.resolution))
	r.tallyWatchers(tallies, gen1, pods)
	r.tallyPagers(pagers)
	fmt.Fprintf(os.Stderr, "%s: readers: RSS %s idle, %s peak; events per watcher min %d, median %d of %d due; %d page-throughs\n",
		t.name, mib(float64(r.rssIdle)), mib(float64(r.rssPeak)), r.eventsMin, r.eventsMedian, r.dueMedian, r.throughs)
	return r, nil
}

func (r *readersResult) tallyWatchers(tallies []*watchTally, endGen uint64, pods int) {
	var got, due []int
	for _, w := range tallies {
		n, d := w.received(endGen), w.due(endGen, pods)
		got, due = append(got, n), append(due, d)
		switch {
		case w.ended != "":
			r.ended++
			r.failures[w.ended]++
		case n < d:
			r.behind++
		default:
			r.caughtUp++
		}
		if w.events > 0 {
			r.watchersOpen++
		}
	}
	slices.Sort(got)
	slices.Sort(due)
	if len(got) > 0 {
		r.eventsMin, r.eventsMedian, r.dueMedian = got[0], got[len(got)/2], due[len(due)/2]
	}
}

func (r *readersResult) tallyPagers(pagers []*pageTally) {
	var ds []time.Duration
	for _, p := range pagers {
		r.pages += p.pages
		r.throughs += p.throughs
		r.short += p.short
		ds = append(ds, p.ds...)
		for k, n := range p.shortBy {
			r.failures[k] += n
		}
		for k, n := range p.failures {
			r.failures["page: "+k] += n
			if k == "status 429" {
				r.tooMany += n
			} else {
				r.errors += n
			}
		}
	}
	slices.Sort(ds)
	r.pageP50, r.pageP99 = nearestRank(ds, 0.5), nearestRank(ds, 0.99)
}

// generation is the newest snapshot's generation, the resourceVersion metrics-ring gives lists and events.
func generation(ctx context.Context, hc *http.Client, base string) (uint64, error) {
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	code, _, err := get(ctx, hc, base+nodesPath+"?limit=1", "application/json", &l)
	if err != nil || code != http.StatusOK {
		return 0, fmt.Errorf("reading the newest resourceVersion: status %d: %v", code, err)
	}
	return generationOf(l.Metadata.ResourceVersion)
}

// generationOf is the generation in a resourceVersion, `<generation>-<run>` (DESIGN.md section 2: the run names the
// server, so that another replica's numbers are never taken for ours); a bare number is read too.
func generationOf(rv string) (uint64, error) {
	num, _, _ := strings.Cut(rv, "-")
	gen, err := strconv.ParseUint(num, 10, 64)
	if err != nil || gen == 0 {
		return 0, fmt.Errorf("the nodes list's resourceVersion %q is not a generation", rv)
	}
	return gen, nil
}
