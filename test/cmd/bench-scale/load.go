package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// loadResult is one load phase: many clients listing every pod at once.
type loadResult struct {
	clients                       int
	via                           string
	elapsed                       time.Duration // first request to last answer
	requests, errors, incomplete  int
	errorKinds                    map[string]int
	p50, p99, max                 time.Duration
	bytes                         int64 // of one complete answer
	rssStart, rssMax, rssEnd, hwm uint64
	hwmReset                      bool // hwm is the load's peak, not the process's since start
	expectedCycles                float64
	coll                          collection
}

// keptInterval is a phase's verdict on collection, for yesNo: every interval had its cycle, each cycle finished
// within the resolution, and no kubelet request failed. A window shorter than one interval has no verdict (NaN).
func keptInterval(c collection, expectedCycles float64, resolution time.Duration) float64 {
	if expectedCycles < 1 {
		return math.NaN()
	}
	return b2f(c.cycles >= expectedCycles-1 && c.cycleP99 < resolution.Seconds() && c.failuresInWindow == 0)
}

// one request's outcome, kept per client so the clients share nothing on the hot path.
type outcome struct {
	d     time.Duration
	items int
	bytes int64
	err   string
}

// runLoad has o.loadClients clients, each with its own connection as separate programs would have, list every
// pod (JSON, uncompressed) back to back for o.loadDuration and at most o.loadMaxRequests requests in all. Requests
// in flight at the deadline finish (each is bounded by the client's timeout). Meanwhile it samples the target's
// RSS, and reads its self-metrics before and after to see whether collection kept its interval.
func runLoad(ctx context.Context, o options, t target, b *framework.Backend, direct *http.Client, base string,
	newClient func(time.Duration) (*http.Client, error)) (*loadResult, error) {
	l := &loadResult{clients: o.loadClients, via: o.loadVia, errorKinds: map[string]int{}}
	clients := make([]*http.Client, o.loadClients)
	for i := range clients {
		hc, err := newClient(2 * time.Minute)
		if err != nil {
			return nil, err
		}
		clients[i] = hc
	}
	wantPods := o.nodes * o.pods
	fmt.Fprintf(os.Stderr, "%s: load: %d clients listing all %d pods via %s for %s (at most %d requests)...\n",
		t.name, o.loadClients, wantPods, o.loadVia, o.loadDuration, o.loadMaxRequests)
	// The peak is this phase's, not the reader phase's before it.
	l.hwmReset = resetPeakRSS(b.Proc.Pid())
	s0, m0, err := observe(ctx, b, direct)
	if err != nil {
		return nil, err
	}
	l.rssStart, l.coll.loadBefore = s0.RSS, loadAvg()

	// Everything below ends by this context: the load window plus the longest a request may take.
	lctx, cancel := context.WithTimeout(ctx, o.loadDuration+3*time.Minute)
	defer cancel()
	var bg sync.WaitGroup
	rss := sampleRSS(lctx, b, nil)
	var profErr error
	if t.profiles && o.cpuProfile != "" {
		url, _ := cpuProfileURL(b.URL(), o.loadDuration)
		bg.Go(func() {
			profErr = saveProfile(lctx, direct, url, o.cpuProfile+".load")
		})
	}

	start := time.Now()
	deadline := start.Add(o.loadDuration)
	var issued atomic.Int64
	results := make([][]outcome, len(clients))
	var wg sync.WaitGroup
	for i, hc := range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) && issued.Add(1) <= int64(o.loadMaxRequests) && lctx.Err() == nil {
				results[i] = append(results[i], listOnce(lctx, hc, base+podsPath))
			}
		})
	}
	wg.Wait()
	l.elapsed = time.Since(start)
	rssMax := rss.stop()
	s1, m1, err := observe(ctx, b, direct)
	if err != nil {
		return nil, err
	}
	bg.Wait()
	if profErr != nil {
		return nil, profErr
	}
	l.rssMax, l.rssEnd, l.hwm = max(rssMax, s0.RSS, s1.RSS), s1.RSS, s1.PeakRSS
	l.coll.window, l.coll.loadAfter = l.elapsed, loadAvg()
	l.coll.cpuPerMin = (s1.CPU - s0.CPU).Seconds() / l.elapsed.Minutes()
	l.coll.rss, l.coll.peakRSS = s1.RSS, s1.PeakRSS
	l.coll.cycleStats(t, m0, m1)
	l.expectedCycles = float64(int(l.elapsed / o.resolution))
	var ds []time.Duration
	for _, rs := range results {
		for _, r := range rs {
			l.requests++
			ds = append(ds, r.d)
			switch {
			case r.err != "":
				l.errors++
				l.errorKinds[r.err]++
			case r.items != wantPods:
				l.incomplete++
				l.errorKinds[fmt.Sprintf("200 with %d of %d pods", r.items, wantPods)]++
			default:
				l.bytes = r.bytes
			}
		}
	}
	slices.Sort(ds)
	l.p50, l.p99, l.max = nearestRank(ds, 0.5), nearestRank(ds, 0.99), nearestRank(ds, 1)
	return l, nil
}

// listOnce GETs a pod list and counts its items as it streams by, without decoding: the clients must not be
// the bottleneck on a 2-core machine, yet a short answer has to be seen.
func listOnce(ctx context.Context, hc *http.Client, url string) outcome {
	start := time.Now()
	var o outcome
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		o.err = err.Error()
		return o
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		o.d, o.err = time.Since(start), errKind(err)
		return o
	}
	defer resp.Body.Close()
	ic := &itemCounter{}
	o.bytes, err = io.Copy(ic, resp.Body)
	o.d, o.items = time.Since(start), ic.n
	switch {
	case resp.StatusCode != http.StatusOK:
		o.err = fmt.Sprintf("status %d", resp.StatusCode)
	case err != nil:
		o.err = "reading body: " + errKind(err)
	}
	return o
}

func errKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "timeout or cancelled"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed mid-answer"
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return "client timeout"
	}
	return err.Error()
}

// itemMarker occurs once per PodMetrics in a JSON list (every item has a window; the list itself has none).
var itemMarker = []byte(`"window":`)

// itemCounter counts itemMarker in a stream, also across the boundaries between writes.
type itemCounter struct {
	n    int
	tail []byte
}

func (c *itemCounter) Write(p []byte) (int, error) {
	n, k := len(p), len(itemMarker)-1
	// A marker seen here straddles the previous writes and this one: tail is too short to hold one whole.
	joined := append(append(make([]byte, 0, 2*k), c.tail...), p[:min(len(p), k)]...)
	c.n += bytes.Count(joined, itemMarker) + bytes.Count(p, itemMarker)
	if len(p) < k {
		p = append(c.tail, p...)
	}
	c.tail = append(c.tail[:0], p[max(0, len(p)-k):]...)
	return n, nil
}
