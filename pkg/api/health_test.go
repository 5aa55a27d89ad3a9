package api

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

func TestHealthChecks(t *testing.T) {
	const res, timeout = 15 * time.Second, 10 * time.Second
	bound := LivenessBound(res, timeout) // 50s
	start := sampleTime
	tests := []struct {
		name                 string
		synced, ready        bool
		lastCycle            time.Time
		lastErr              error
		cycles               uint64 // 1 when ready and not set
		listed, servable     int
		complete             bool
		since                time.Duration // clock minus start
		wantInformers        string        // "" means the check passes
		wantReady, wantAlive string
	}{
		{name: "starting: informers not synced", since: time.Second,
			wantInformers: "not synced", wantReady: "informers"},
		{name: "synced, first cycle running", synced: true, since: 5 * time.Second,
			wantReady: "first kubelet collection cycle has not finished"},
		{name: "first cycle done", synced: true, ready: true, lastCycle: start.Add(10 * time.Second), since: 20 * time.Second},
		{name: "first cycle failed: still ready", synced: true, ready: true, lastCycle: start.Add(10 * time.Second),
			lastErr: errors.New("all kubelets down"), since: 20 * time.Second},
		{name: "first kubelet cycle reached a third of the nodes", synced: true, ready: true, listed: 3000,
			servable: 1000, lastCycle: start.Add(10 * time.Second), since: 20 * time.Second,
			wantReady: "after 1 kubelet collection cycles, 1000 of 3000 nodes are served"},
		{name: "third incomplete cycle", synced: true, ready: true, cycles: ReadyWithinCycles - 1, listed: 3000,
			servable: 2999, lastCycle: start.Add(40 * time.Second), since: 50 * time.Second,
			wantReady: "2999 of 3000 nodes"},
		{name: "incomplete up to the bound: ready anyway", synced: true, ready: true, cycles: ReadyWithinCycles,
			listed: 3000, servable: 2999, lastCycle: start.Add(55 * time.Second), since: 60 * time.Second},
		{name: "an earlier cycle was complete: ready", synced: true, ready: true, cycles: 2, listed: 3000,
			servable: 2000, complete: true, lastCycle: start.Add(25 * time.Second), since: 30 * time.Second},
		{name: "no cycle within the startup grace", synced: true, since: bound + startupAllowance + time.Second,
			wantReady: "has not finished", wantAlive: "no kubelet collection cycle has finished"},
		{name: "loop stuck", synced: true, ready: true, lastCycle: start.Add(time.Minute), since: time.Minute + bound + time.Second,
			wantAlive: "collection loop is stuck"},
		{name: "slow but within bound", synced: true, ready: true, lastCycle: start.Add(time.Minute), since: time.Minute + bound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := start
			m := &fakeMetrics{health: storage.Health{Source: "kubelet", LastCycle: tc.lastCycle, LastError: tc.lastErr}}
			if tc.ready {
				m.health.Cycles = max(tc.cycles, 1)
			}
			m.health.Listed, m.health.Servable = tc.listed, tc.servable
			if tc.complete {
				m.health.Complete = start
			}
			h := newHealthChecks(m, func() bool { return tc.synced }, res, timeout, func() time.Time { return now })
			now = start.Add(tc.since)
			check(t, "informers", h.informersSynced(nil), tc.wantInformers)
			check(t, "readiness", h.firstCycleDone(nil), tc.wantReady)
			check(t, "liveness", h.collectionTimely(nil), tc.wantAlive)
		})
	}
}

func check(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: want pass, got %v", what, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: want failure containing %q, got %v", what, want, err)
	}
}
