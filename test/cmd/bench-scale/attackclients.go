package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// hpaOutcomes tallies the HPA-like clients' lists in one window.
type hpaOutcomes struct {
	requests, ok, tooMany, errors, wrongCount int
	kinds                                     map[string]int
	ds                                        []time.Duration
}

func (h *hpaOutcomes) add(r outcome, want int) {
	if h.kinds == nil {
		h.kinds = map[string]int{}
	}
	h.requests++
	h.ds = append(h.ds, r.d)
	switch {
	case r.err == "status 429":
		h.tooMany++
	case r.err != "":
		h.errors++
		h.kinds[r.err]++
	case r.items != want:
		h.wrongCount++
		h.kinds[fmt.Sprintf("200 with %d of %d pods", r.items, want)]++
	default:
		h.ok++
	}
}

func (h *hpaOutcomes) quantile(q float64) time.Duration {
	slices.Sort(h.ds)
	return nearestRank(h.ds, q)
}

// hpaRequest is one HPA-like client's list: its workload's pods in its namespace, by its own label selector, in
// v1 for even clients and v1beta1 for odd ones (both are in use by controllers).
type hpaRequest struct {
	url      string
	interval time.Duration
	offset   time.Duration // of its first list from the fleet's start, so the fleet's lists are spread evenly
}

func hpaRequests(o options, base string) []hpaRequest {
	cfg := o.simConfig()
	rs := make([]hpaRequest, o.hpaClients)
	for i := range rs {
		ns, sel := kubeletsim.WorkloadSelector(cfg, i)
		ver := "v1"
		if i%2 == 1 {
			ver = "v1beta1"
		}
		rs[i] = hpaRequest{
			url:      fmt.Sprintf("%s/apis/metrics.k8s.io/%s/namespaces/%s/pods?labelSelector=%s", base, ver, ns, url.QueryEscape(sel)),
			interval: o.hpaInterval,
			offset:   time.Duration(i) * o.hpaInterval / time.Duration(o.hpaClients),
		}
	}
	return rs
}

// runHPA lists r.url every r.interval until stopAt (a list is started only before it), and hands each outcome to
// record with the time its request was sent. A list that takes longer than the interval delays the next, as a
// controller's sync does.
func runHPA(ctx context.Context, hc *http.Client, r hpaRequest, start, stopAt time.Time, record func(time.Time, outcome)) {
	next := start.Add(r.offset)
	for {
		pause(ctx, time.Until(next))
		now := time.Now()
		if ctx.Err() != nil || !now.Before(stopAt) {
			return
		}
		record(now, listOnce(ctx, hc, r.url))
		next = next.Add(r.interval)
		if n := time.Now(); next.Before(n) {
			next = n
		}
	}
}

// attackTally is one attacking user's lists.
type attackTally struct {
	requests, complete, tooMany, errors, short, cancelled int
	kinds                                                 map[string]int
}

// attackSelector is user u's k-th selector: it matches every pod (no pod has label x) and no other user's or
// earlier request's selector is the same, so no two of them share a build.
func attackSelector(u, k int) string { return fmt.Sprintf("x!=u%d-v%d", u, k) }

// runAttacker has user u list every pod back to back until ctx ends, cycling through selectors distinct
// selectors. A request ctx cut short is counted as cancelled, not as an error.
func runAttacker(ctx context.Context, hc *http.Client, base string, u, selectors, pods int, budget *atomic.Int64) *attackTally {
	t := &attackTally{kinds: map[string]int{}}
	for k := 0; ctx.Err() == nil && budget.Add(-1) >= 0; k++ {
		r := listOnce(ctx, hc, base+"/apis/metrics.k8s.io/v1/pods?labelSelector="+url.QueryEscape(attackSelector(u, k%selectors)))
		switch {
		case ctx.Err() != nil:
			t.cancelled++
			continue
		case r.err == "status 429":
			// As client-go does on 429: wait (the server's Retry-After is 1 s) rather than spin.
			t.tooMany++
			pause(ctx, time.Second)
		case r.err != "":
			t.errors++
			t.kinds[r.err]++
		case r.items != pods:
			t.short++
			t.kinds[fmt.Sprintf("200 with %d of %d pods", r.items, pods)]++
		default:
			t.complete++
		}
		t.requests++
	}
	return t
}
