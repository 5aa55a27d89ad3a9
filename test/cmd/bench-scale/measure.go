package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

const (
	nodesPath = "/apis/metrics.k8s.io/v1beta1/nodes"
	podsPath  = "/apis/metrics.k8s.io/v1beta1/pods"
)

// get GETs url as JSON into out (when not nil) and returns the status and the bytes read.
func get(ctx context.Context, hc *http.Client, url, accept string, out any) (int, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || out == nil {
		n, err := io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, n, err
	}
	cr := &countingReader{r: resp.Body}
	if err := json.NewDecoder(cr).Decode(out); err != nil {
		return resp.StatusCode, cr.n, fmt.Errorf("decoding %s: %w", url, err)
	}
	// The decoder stops at the object's end, before the encoder's closing newline: a body closed before its end
	// closes its HTTP/1.1 connection, and every probe then cost the server a TLS handshake (7 % of metrics-ring's
	// CPU in the hour's soak).
	_, err = io.Copy(io.Discard, cr)
	return resp.StatusCode, cr.n, err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// waitComplete polls base until it lists every node and every pod with all its containers, failing fast if
// the server exits. It returns when the nodes request of the poll that got the complete answer was sent: the server
// answers from the snapshot it holds when a request arrives, so that is when it was complete at the latest, where
// the poll's return adds the transfer and decoding of every pod (114 MB of JSON at 10,000 nodes, seconds).
func waitComplete(ctx context.Context, b *framework.Backend, hc *http.Client, base string, nodes, pods, containers int, timeout time.Duration) (asked time.Time, err error) {
	err = framework.Poll(ctx, "a complete answer from "+base, time.Second, timeout, func(ctx context.Context) (bool, error) {
		if exited, err := b.Proc.Exited(); exited {
			return false, framework.StopPolling(fmt.Errorf("%s exited: %v; log: %s", b.Proc.Name, err, b.Proc.LogFile))
		}
		asked = time.Now()
		var nl metricsv1beta1.NodeMetricsList
		if code, _, err := get(ctx, hc, base+nodesPath, "application/json", &nl); err != nil || code != http.StatusOK {
			return false, fmt.Errorf("nodes: status %d: %v", code, err)
		}
		if len(nl.Items) != nodes {
			return false, fmt.Errorf("%d of %d nodes listed", len(nl.Items), nodes)
		}
		var pl metricsv1beta1.PodMetricsList
		if code, _, err := get(ctx, hc, base+podsPath, "application/json", &pl); err != nil || code != http.StatusOK {
			return false, fmt.Errorf("pods: status %d: %v", code, err)
		}
		complete := 0
		for _, p := range pl.Items {
			if len(p.Containers) == containers {
				complete++
			}
		}
		if complete != pods {
			return false, fmt.Errorf("%d of %d pods listed with all %d containers", complete, pods, containers)
		}
		return true, nil
	})
	return asked, err
}

// collection is one window of a target collecting: its CPU and memory, and what its self-metrics say of the
// cycles in the window.
type collection struct {
	window       time.Duration
	cpuPerMin    float64
	rss, peakRSS uint64
	rssFile      uint64
	heap         float64
	// heapInuse, heapRetained, stacks and runtimeSys break the anonymous RSS down as the Go runtime sees it:
	// spans holding objects, freed spans not yet returned to the OS, goroutine stacks, and its own structures.
	heapInuse, heapRetained     float64
	stacks, runtimeSys          float64
	fresh50, fresh99            float64
	cycles, cycleMean, cycleP99 float64
	failures, failuresInWindow  float64
	loadBefore, loadAfter       string
}

// cycleStats fills the self-metric parts of c from two scrapes of /metrics taken around the window.
func (c *collection) cycleStats(t target, m0, m1 samples) {
	c.heap = m1.value("go_memstats_heap_alloc_bytes")
	c.heapInuse = m1.value("go_memstats_heap_inuse_bytes")
	c.heapRetained = m1.value("go_memstats_heap_idle_bytes") - m1.value("go_memstats_heap_released_bytes")
	c.stacks = m1.value("go_memstats_stack_inuse_bytes")
	for _, n := range []string{"mspan_sys", "mcache_sys", "buck_hash_sys", "gc_sys", "other_sys"} {
		c.runtimeSys += m1.value("go_memstats_" + n + "_bytes")
	}
	c.fresh50, c.fresh99 = math.NaN(), math.NaN()
	if t.freshness != "" {
		c.fresh50, c.fresh99 = histogramQuantile(m0, m1, t.freshness, 0.5), histogramQuantile(m0, m1, t.freshness, 0.99)
	}
	c.cycles = m1.value(t.collection+"_count") - m0.value(t.collection+"_count")
	c.cycleMean = math.NaN()
	if c.cycles > 0 {
		c.cycleMean = (m1.value(t.collection+"_sum") - m0.value(t.collection+"_sum")) / c.cycles
	}
	c.cycleP99 = histogramQuantile(m0, m1, t.collection, 0.99)
	for _, f := range t.failures {
		c.failures += m1.value(f)
		c.failuresInWindow += m1.value(f) - m0.value(f)
	}
}

// measureCollection reads CPU and memory of the target (and, for context, of the other processes in procs: the
// control plane and this one, which runs the simulator) over a window in which nothing queries the metrics API.
func measureCollection(ctx context.Context, t target, b *framework.Backend, hc *http.Client, window time.Duration,
	procs map[string]int) (collection, map[string]float64, error) {
	c := collection{window: window}
	m0, err := scrapeMetrics(ctx, hc, b.URL())
	if err != nil {
		return c, nil, err
	}
	s0, err := b.Proc.Stat()
	if err != nil {
		return c, nil, err
	}
	before := map[string]framework.ProcStat{}
	for name, pid := range procs {
		if st, err := framework.ReadProcStat(pid); err == nil {
			before[name] = st
		}
	}
	c.loadBefore = loadAvg()
	start := time.Now()
	select {
	case <-ctx.Done():
		return c, nil, ctx.Err()
	case <-time.After(window):
	}
	s1, err := b.Proc.Stat()
	if err != nil {
		return c, nil, err
	}
	minutes := time.Since(start).Minutes()
	c.loadAfter = loadAvg()
	c.cpuPerMin = (s1.CPU - s0.CPU).Seconds() / minutes
	c.rss, c.peakRSS, c.rssFile = s1.RSS, s1.PeakRSS, s1.RSSFile
	others := map[string]float64{}
	for name, pid := range procs {
		if st, err := framework.ReadProcStat(pid); err == nil {
			others[name] = (st.CPU - before[name].CPU).Seconds() / minutes
		}
	}
	m1, err := scrapeMetrics(ctx, hc, b.URL())
	if err != nil {
		return c, nil, err
	}
	c.cycleStats(t, m0, m1)
	return c, others, nil
}

// latency is one endpoint's timing over a bounded number of sequential GETs.
type latency struct {
	endpoint, via string
	n             int
	p50, p99      time.Duration
	bytes         int64
}

// timeGets GETs url as JSON up to n times, one after another, stopping early when budget has passed.
func timeGets(ctx context.Context, hc *http.Client, url string, n int, budget time.Duration) (latency, error) {
	var l latency
	var ds []time.Duration
	deadline := time.Now().Add(budget)
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		start := time.Now()
		code, size, err := get(ctx, hc, url, "application/json", nil)
		d := time.Since(start)
		if err != nil {
			return l, err
		}
		if code != http.StatusOK {
			return l, fmt.Errorf("status %d", code)
		}
		ds = append(ds, d)
		l.bytes = size
	}
	slices.Sort(ds)
	l.n = len(ds)
	l.p50, l.p99 = nearestRank(ds, 0.5), nearestRank(ds, 0.99)
	return l, nil
}

// nearestRank is the q-quantile of sorted ds by the nearest-rank method (with 50 samples p99 is the maximum).
func nearestRank(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// servedAge is how old the served node samples are (now minus each NodeMetrics' timestamp): median and max
// over one direct list. It includes the wait for the next collection, so it is at most about one resolution
// plus the scrape-to-served delay when collection keeps up.
func servedAge(ctx context.Context, hc *http.Client, base string) ([2]time.Duration, error) {
	var nl metricsv1beta1.NodeMetricsList
	if code, _, err := get(ctx, hc, base+nodesPath, "application/json", &nl); err != nil || code != http.StatusOK {
		return [2]time.Duration{}, fmt.Errorf("listing nodes: status %d: %v", code, err)
	}
	now := time.Now()
	ages := make([]time.Duration, 0, len(nl.Items))
	for _, n := range nl.Items {
		ages = append(ages, now.Sub(n.Timestamp.Time))
	}
	slices.Sort(ages)
	return [2]time.Duration{nearestRank(ages, 0.5), nearestRank(ages, 1)}, nil
}

// cpuProfileURL is the address of a CPU profile of the server at base over d, in whole seconds from 1 to 100 (so
// that saveProfile stays within the client's timeout), and the seconds it asks for.
func cpuProfileURL(base string, d time.Duration) (string, int) {
	secs := max(1, min(100, int(d.Seconds())))
	return fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs), secs
}

// saveProfile saves a pprof profile (url is the full /debug/pprof/... address; a CPU profile blocks for its
// seconds, at most 100 to stay within the client's timeout) into file.
func saveProfile(ctx context.Context, hc *http.Client, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("profiling: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling %s: status %d (is --profiling off?)", url, resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return f.Close()
}

// loadAvg1 is the machine's one-minute load average (NaN if unread).
func loadAvg1() float64 {
	var v float64
	if _, err := fmt.Sscan(loadAvg(), &v); err != nil {
		return math.NaN()
	}
	return v
}

func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	var a, b, c string
	fmt.Sscan(string(raw), &a, &b, &c)
	return a + " " + b + " " + c
}
