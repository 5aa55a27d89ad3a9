package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// Probing churned pods (issue 29): each second, straight from the server under test, a list by the selector an
// HPA would use for each tracked pod (its workload's, else its app's), as the HPA and kubectl read lists (a GET of
// one pod may answer from the pod informer and a list from a snapshot: only a list shows what they see). The lists
// span every namespace: the servers' latency histogram tells requests apart by scope alone, and namespaced pod
// lists must stay the HPA controller's. A new pod is tracked from when it turns Running until a list shows it (its time to be served); a
// deleted pod from its deletion until no list shows it (whether, and how long, it was served after). At most
// `limit` of each are tracked at a time, so the probes' own load stays bounded whatever the churn rate; the rest
// are counted as not tracked.

const (
	// deletedGrace is how long after a deletion returns a probe may still find the pod: the server's informer
	// has to receive the event first. Deleted pods are probed from then on.
	deletedGrace = time.Second
	// newPatience and deletedPatience, in cycles, end the tracking of a pod never served, or still served.
	newPatience, deletedPatience = 6, 4
)

// probeResult is what the probes found over a soak window.
type probeResult struct {
	toServe                   []time.Duration // each tracked new pod's time from Running to served
	neverServed               int             // tracked new pods not served within newPatience cycles
	newUntracked, deletedSeen int             // new pods not tracked (over the limit); deleted pods tracked
	deletedUntracked          int
	servedAfterDeletion       int           // tracked deleted pods served at least deletedGrace after it
	maxServedAfter            time.Duration // the longest such: the last probe that found one, after its deletion
	probes                    int
	errors                    map[string]int
}

type probed struct {
	since      time.Time // Running, or deleted
	lastServed time.Time // deleted pods: the last probe that found it
	selector   string    // the list that shows it: labelSelector in its namespace
}

// probeSelector is the label selector a reader of the pod would list by: its workload's (the HPA's), else its
// app's.
func probeSelector(labels map[string]string) string {
	for _, k := range []string{"workload", "app"} {
		if v, ok := labels[k]; ok {
			return k + "=" + v
		}
	}
	return ""
}

// tracker probes churned pods; created and deleted are safe for concurrent use.
type tracker struct {
	hc         *http.Client
	base       string
	resolution time.Duration
	limit      int

	mu       sync.Mutex
	newPods  map[string]*probed // "namespace/name"
	gonePods map[string]*probed
	res      probeResult
}

func newTracker(hc *http.Client, base string, resolution time.Duration, limit int) *tracker {
	return &tracker{hc: hc, base: base, resolution: resolution, limit: limit, newPods: map[string]*probed{},
		gonePods: map[string]*probed{}, res: probeResult{errors: map[string]int{}}}
}

// created tracks a new pod that turned Running at.
func (t *tracker) created(key string, labels map[string]string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.newPods) >= t.limit {
		t.res.newUntracked++
		return
	}
	t.newPods[key] = &probed{since: at, selector: probeSelector(labels)}
}

// deleted tracks a pod whose deletion returned at; a new pod deleted before it was served stops being tracked
// as new.
func (t *tracker) deleted(key string, labels map[string]string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.newPods, key)
	if len(t.gonePods) >= t.limit {
		t.res.deletedUntracked++
		return
	}
	t.gonePods[key] = &probed{since: at, selector: probeSelector(labels)}
	t.res.deletedSeen++
}

// run probes every second until until.
func (t *tracker) run(ctx context.Context, until time.Time) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if !now.Before(until) {
				return
			}
			t.probeOnce(ctx, now)
		}
	}
}

// probeOnce lists, once per selector, for every tracked pod due at now, and settles those done.
func (t *tracker) probeOnce(ctx context.Context, now time.Time) {
	t.mu.Lock()
	var keys []string
	lists := map[string][]int{} // selector to the keys its list shows
	add := func(k string, p *probed) {
		lists[p.selector] = append(lists[p.selector], len(keys))
		keys = append(keys, k)
	}
	for k, p := range t.newPods {
		add(k, p)
	}
	for k, p := range t.gonePods {
		if now.Sub(p.since) >= deletedGrace {
			add(k, p)
		}
	}
	t.mu.Unlock()
	served := make([]bool, len(keys))
	failed := make([]string, len(keys))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for list, idx := range lists {
		g.Go(func() error {
			names, err := t.list(gctx, list)
			mu.Lock()
			defer mu.Unlock()
			for _, i := range idx {
				served[i] = names[keys[i]]
				if err != nil {
					failed[i] = errKind(err)
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	t.settle(now, keys, served, failed)
}

// list returns the pods ("namespace/name") a list by selector shows.
func (t *tracker) list(ctx context.Context, selector string) (map[string]bool, error) {
	var pl metricsv1beta1.PodMetricsList
	code, _, err := get(ctx, t.hc, fmt.Sprintf("%s%s?labelSelector=%s", t.base, podsPath, url.QueryEscape(selector)),
		"application/json", &pl)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(pl.Items))
	for _, p := range pl.Items {
		names[p.Namespace+"/"+p.Name] = true
	}
	return names, nil
}

// settle records what one round of probes sent at now found.
func (t *tracker) settle(now time.Time, keys []string, served []bool, failed []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &t.res
	for i, k := range keys {
		r.probes++
		if failed[i] != "" {
			r.errors[failed[i]]++
			continue
		}
		if p, ok := t.newPods[k]; ok {
			if served[i] {
				r.toServe = append(r.toServe, now.Sub(p.since))
				delete(t.newPods, k)
			}
			continue
		}
		p, ok := t.gonePods[k]
		if !ok || now.Sub(p.since) < deletedGrace {
			// Probed as a new pod and deleted while its list was answered: a probe sent before the deletion (or
			// within its grace) says nothing of it; the next one does.
			continue
		}
		if served[i] {
			p.lastServed = now
		}
		if !served[i] || now.Sub(p.since) >= deletedPatience*t.resolution {
			t.settleDeleted(p)
			delete(t.gonePods, k)
		}
	}
	for k, p := range t.newPods {
		if now.Sub(p.since) >= newPatience*t.resolution {
			r.neverServed++
			delete(t.newPods, k)
		}
	}
}

// settleDeleted counts a deleted pod no longer tracked; needs t.mu.
func (t *tracker) settleDeleted(p *probed) {
	if p.lastServed.IsZero() {
		return
	}
	t.res.servedAfterDeletion++
	t.res.maxServedAfter = max(t.res.maxServedAfter, p.lastServed.Sub(p.since))
}

// result ends the tracking: deleted pods still tracked are settled with what was found so far.
func (t *tracker) result() probeResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, p := range t.gonePods {
		t.settleDeleted(p)
		delete(t.gonePods, k)
	}
	r := t.res
	r.toServe = slices.Clone(r.toServe)
	slices.Sort(r.toServe)
	return r
}

// cycles is the q-quantile of the times to be served, in collection cycles (NaN without any).
func (r probeResult) cycles(q float64, resolution time.Duration) float64 {
	if len(r.toServe) == 0 {
		return math.NaN()
	}
	return float64(nearestRank(r.toServe, q)) / float64(resolution)
}
