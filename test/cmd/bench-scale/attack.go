package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// The attack phase's identities: every user is in readersGroup, which the phase gives what the ClusterRole view
// grants on metrics.k8s.io, the least a user needs to read it; the HPA-like clients share one user, as a controller manager's
// horizontal-pod-autoscaler controller does.
const (
	readersGroup = "metrics-ring-bench:readers"
	hpaUser      = "bench-hpa-controller"
	// hpaTimeout bounds each HPA-like list, as the controller's client does.
	hpaTimeout = 30 * time.Second
)

// attackResult is one attack phase (issue 26 finding 1): users each cycling through distinct selectors that
// match every pod, while HPA-like clients list their own workloads' pods.
type attackResult struct {
	users                     int
	rssIdle, rssHPA, rssPeak  uint64 // before any of the phase's clients, the HPA fleet alone, and with the attack
	hwm                       uint64 // VmHWM after the phase, reset at its start (0 when that is not possible)
	alone, during             hpaOutcomes
	attack                    attackTally
	attackElapsed             time.Duration
	builds, evicted, rejected float64
	keptMax, keptEnd          float64
	// The server's own view of the lists' latency (apiserver_request_duration_seconds, over the whole phase):
	// namespaced pod lists are the HPA clients', cluster-wide ones the attackers'.
	serverHPA50, serverHPA99, serverAttack50 float64
	expectedCycles                           float64
	coll                                     collection
}

// Series of metrics-ring's /metrics the phase reads.
const (
	buildsTotal    = "metrics_ring_api_builds_total"
	buildsEvicted  = "metrics_ring_api_builds_evicted_total"
	buildsKept     = "metrics_ring_api_builds_kept_bytes"
	buildsRejected = "metrics_ring_api_builds_rejected_total"
)

// sumOf adds every series of the metric name (all its label values).
func (s samples) sumOf(name string) float64 {
	var v float64
	for k, x := range s {
		if k == name || strings.HasPrefix(k, name+"{") {
			v += x
		}
	}
	return v
}

// runAttack measures, after a resolution with no API load (idle RSS): the HPA fleet alone for one of its
// intervals, then the fleet with users attackers, each on its own identity and connection, listing every pod
// back to back through o.attackSelectors distinct all-matching selectors for o.attackDuration. The fleet is
// o.hpaClients clients sharing one identity and one HTTP/2 connection, each listing its workload (o.hpaPods pods)
// once every o.hpaInterval.
func runAttack(ctx context.Context, o options, t target, b *framework.Backend, cp *framework.ControlPlane,
	direct *http.Client, users int) (*attackResult, error) {
	r := &attackResult{users: users}
	base, backend := b.URL(), b
	if o.loadVia == "aggregator" {
		base, backend = cp.URL, nil
	}
	hpa, attackers, err := attackClients(ctx, cp, backend, users)
	if err != nil {
		return nil, err
	}
	pods := o.nodes * o.pods
	fmt.Fprintf(os.Stderr, "%s: attack: idle for %s, %d HPA-like clients alone for %s, then with %d users listing all %d pods through %d distinct selectors each via %s for %s...\n",
		t.name, o.resolution, o.hpaClients, o.hpaInterval, users, pods, o.attackSelectors, o.loadVia, o.attackDuration)
	pause(ctx, o.resolution)
	hwmReset := resetPeakRSS(b.Proc.Pid())
	s0, m0, err := observe(ctx, b, direct)
	if err != nil {
		return nil, err
	}
	r.rssIdle, r.coll.loadBefore = s0.RSS, loadAvg()

	pctx, stopAll := context.WithTimeout(ctx, o.hpaInterval+o.attackDuration+2*hpaTimeout)
	defer stopAll()
	kept := sampleKept(pctx, direct, b.URL())
	rss := sampleRSS(pctx, b, nil)
	start := time.Now()
	attackStart := start.Add(o.hpaInterval)
	deadline := attackStart.Add(o.attackDuration)
	var mu sync.Mutex
	record := func(sent time.Time, out outcome) {
		mu.Lock()
		defer mu.Unlock()
		if sent.Before(attackStart) {
			r.alone.add(out, o.hpaPods)
		} else {
			r.during.add(out, o.hpaPods)
		}
	}
	var fleet sync.WaitGroup
	for _, req := range hpaRequests(o, base) {
		fleet.Go(func() { runHPA(pctx, hpa, req, start, deadline, record) })
	}
	pause(pctx, time.Until(attackStart))
	r.rssHPA = rss.stop()
	rss = sampleRSS(pctx, b, nil)

	actx, stopAttack := context.WithDeadline(pctx, deadline)
	defer stopAttack()
	var profiled chan error
	if t.profiles && o.cpuProfile != "" {
		// The attack's own CPU profile, to say where a missed goal went.
		url, _ := cpuProfileURL(b.URL(), o.attackDuration)
		profiled = make(chan error, 1)
		go func() { profiled <- saveProfile(pctx, direct, url, fmt.Sprintf("%s.attack-%d", o.cpuProfile, users)) }()
	}
	var midway chan error
	if t.profiles && o.heapProfile != "" {
		// Halfway through, what the server holds while it is attacked (the heap: answers in flight, not only what is
		// kept) and where its requests wait (every goroutine's stack, counted by stack).
		midway = make(chan error, 1)
		go func() { midway <- attackMidway(actx, b, direct, fmt.Sprintf("%s.attack-%d", o.heapProfile, users)) }()
	}
	var budget atomic.Int64
	budget.Store(int64(o.attackMaxRequests))
	tallies := make([]*attackTally, users)
	if o.attackNice && backend != nil {
		if tallies, err = runAttackProcess(pctx, o, cp, b, users, deadline); err != nil {
			return nil, err
		}
	} else {
		var attack sync.WaitGroup
		for u := range users {
			attack.Go(func() { tallies[u] = runAttacker(actx, attackers[u], base, u, o.attackSelectors, pods, &budget) })
		}
		attack.Wait()
	}
	r.attackElapsed = time.Since(attackStart)
	if t.profiles && o.heapProfile != "" {
		if err := saveProfile(ctx, direct, b.URL()+"/debug/pprof/heap", fmt.Sprintf("%s.attack-%d", o.heapProfile, users)); err != nil {
			return nil, err
		}
	}
	fleet.Wait()
	if midway != nil {
		if err := <-midway; err != nil {
			return nil, err
		}
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			return nil, err
		}
	}
	s1, m1, err := observe(ctx, b, direct)
	if err != nil {
		return nil, err
	}
	r.rssPeak, r.keptMax = max(rss.stop(), s1.RSS), max(kept.stop(), m1.value(buildsKept))
	if hwmReset {
		r.hwm = s1.PeakRSS
	}
	elapsed := time.Since(start)
	r.coll.window, r.coll.loadAfter = elapsed, loadAvg()
	r.coll.cpuPerMin = (s1.CPU - s0.CPU).Seconds() / elapsed.Minutes()
	r.expectedCycles = float64(int(elapsed / o.resolution))
	r.tally(t, m0, m1, tallies)
	fmt.Fprintf(os.Stderr, "%s: attack by %d users: RSS %s idle, %s peak; HPA p99 %s alone, %s during (%d of %d ok); %d builds, %d evicted\n",
		t.name, users, mib(float64(r.rssIdle)), mib(float64(r.rssPeak)), r.alone.quantile(0.99), r.during.quantile(0.99),
		r.during.ok, r.during.requests, int(r.builds), int(r.evicted))
	return r, nil
}

// attackClients gives readersGroup what view grants on metrics.k8s.io and makes the clients of an attack phase:
// the HPA fleet's one (one identity, HTTP/2) and one per attacking user (its own identity and connection).
func attackClients(ctx context.Context, cp *framework.ControlPlane, backend *framework.Backend, users int) (*http.Client, []*http.Client, error) {
	// What view grants on metrics.k8s.io: the role the manifests aggregate into it (no controller manager runs
	// here to aggregate it).
	if err := cp.BindClusterRole(ctx, "metrics-ring-bench-readers", readersGroup, "system:aggregated-metrics-reader"); err != nil {
		return nil, nil, err
	}
	hpa, err := cp.UserClient(backend, hpaUser, []string{readersGroup}, hpaTimeout, true)
	if err != nil {
		return nil, nil, err
	}
	attackers := make([]*http.Client, users)
	for i := range attackers {
		if attackers[i], err = cp.UserClient(backend, fmt.Sprintf("bench-attacker-%d", i), []string{readersGroup}, 2*time.Minute, false); err != nil {
			return nil, nil, err
		}
	}
	return hpa, attackers, nil
}

// tally fills in what the server's metrics (m0 before the phase, m1 after) and the attackers' tallies say.
func (r *attackResult) tally(t target, m0, m1 samples, tallies []*attackTally) {
	r.keptEnd = m1.value(buildsKept)
	const dur = "apiserver_request_duration_seconds"
	list := []string{`resource="pods"`, `verb="LIST"`, `group="metrics.k8s.io"`}
	r.serverHPA50 = histogramQuantileWhere(m0, m1, dur, 0.5, append(list, `scope="namespace"`)...)
	r.serverHPA99 = histogramQuantileWhere(m0, m1, dur, 0.99, append(list, `scope="namespace"`)...)
	r.serverAttack50 = histogramQuantileWhere(m0, m1, dur, 0.5, append(list, `scope="cluster"`)...)
	r.builds = m1.value(buildsTotal) - m0.value(buildsTotal)
	r.evicted = m1.value(buildsEvicted) - m0.value(buildsEvicted)
	r.rejected = m1.sumOf(buildsRejected) - m0.sumOf(buildsRejected)
	r.coll.cycleStats(t, m0, m1)
	r.attack.kinds = map[string]int{}
	for _, a := range tallies {
		r.attack.requests += a.requests
		r.attack.complete += a.complete
		r.attack.tooMany += a.tooMany
		r.attack.errors += a.errors
		r.attack.short += a.short
		r.attack.cancelled += a.cancelled
		for k, n := range a.kinds {
			r.attack.kinds[k] += n
		}
	}
}

// keptSampler reads metrics_ring_api_builds_kept_bytes every 2 s and keeps the largest value.
type keptSampler struct {
	max  atomic.Uint64
	stop func() float64
}

func sampleKept(ctx context.Context, hc *http.Client, base string) *keptSampler {
	s := &keptSampler{}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for sctx.Err() == nil {
			if m, err := scrapeMetrics(sctx, hc, base); err == nil {
				s.max.Store(max(s.max.Load(), uint64(m.value(buildsKept))))
			}
			pause(sctx, 2*time.Second)
		}
	})
	s.stop = func() float64 {
		cancel()
		wg.Wait()
		return float64(s.max.Load())
	}
	return s
}

// attackMidway saves, halfway through the attack (ctx's deadline), the server's heap into prefix.mid and its
// goroutines, counted by stack, into prefix.goroutines.
func attackMidway(ctx context.Context, b *framework.Backend, hc *http.Client, prefix string) error {
	if dl, ok := ctx.Deadline(); ok {
		pause(ctx, time.Until(dl)/2)
	}
	if ctx.Err() != nil {
		return nil // the attack ended early: nothing to see halfway
	}
	if err := saveProfile(ctx, hc, b.URL()+"/debug/pprof/heap", prefix+".mid"); err != nil {
		return err
	}
	if err := saveProfile(ctx, hc, b.URL()+"/debug/pprof/goroutine?debug=1", prefix+".goroutines"); err != nil {
		return err
	}
	// Five seconds of the runtime's trace: where a short request waits (scheduling, locks, the network), which a CPU
	// profile cannot say (`go tool trace -pprof=sched FILE`).
	return saveProfile(ctx, hc, b.URL()+"/debug/pprof/trace?seconds=5", prefix+".trace")
}
