package collect

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestHealthPolicy: readiness waits for the first complete answer within ReadyWithinCycles cycles, and liveness
// fails once no cycle has finished within twice a resolution plus the source's budget.
func TestHealthPolicy(t *testing.T) {
	const res, budget = 15 * time.Second, 10 * time.Second
	const bound = 2 * (res + budget) // 50s
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name                 string
		ready                bool
		lastCycle            time.Time
		lastErr              error
		cycles               uint64 // 1 when ready and not set
		listed, servable     int
		complete             bool
		since                time.Duration // clock minus start
		wantReady, wantAlive string        // "" means the check passes
	}{
		{name: "first cycle running", since: 5 * time.Second,
			wantReady: "first kubelet collection cycle has not finished"},
		{name: "first cycle done", ready: true, lastCycle: start.Add(10 * time.Second), since: 20 * time.Second},
		{name: "first cycle failed: still ready", ready: true, lastCycle: start.Add(10 * time.Second),
			lastErr: errors.New("all kubelets down"), since: 20 * time.Second},
		{name: "first kubelet cycle reached a third of the nodes", ready: true, listed: 3000,
			servable: 1000, lastCycle: start.Add(10 * time.Second), since: 20 * time.Second,
			wantReady: "after 1 kubelet collection cycles, 1000 of 3000 nodes are served"},
		{name: "third incomplete cycle", ready: true, cycles: ReadyWithinCycles - 1, listed: 3000,
			servable: 2999, lastCycle: start.Add(40 * time.Second), since: 50 * time.Second,
			wantReady: "2999 of 3000 nodes"},
		{name: "incomplete up to the bound: ready anyway", ready: true, cycles: ReadyWithinCycles,
			listed: 3000, servable: 2999, lastCycle: start.Add(55 * time.Second), since: 60 * time.Second},
		{name: "an earlier cycle was complete: ready", ready: true, cycles: 2, listed: 3000,
			servable: 2000, complete: true, lastCycle: start.Add(25 * time.Second), since: 30 * time.Second},
		{name: "no cycle within the startup grace", since: bound + startupAllowance + time.Second,
			wantReady: "has not finished", wantAlive: "no kubelet collection cycle has finished"},
		{name: "loop stuck", ready: true, lastCycle: start.Add(time.Minute), since: time.Minute + bound + time.Second,
			wantAlive: "collection loop is stuck"},
		{name: "slow but within bound", ready: true, lastCycle: start.Add(time.Minute), since: time.Minute + bound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := start
			store := storage.New(storage.Options{Source: "kubelet"})
			l, err := New(&fakeSource{budget: budget}, store, Options{Source: "kubelet", Resolution: res,
				Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			h := storage.Health{Source: "kubelet", LastCycle: tc.lastCycle, LastError: tc.lastErr}
			if tc.ready {
				h.Cycles = max(tc.cycles, 1)
			}
			h.Listed, h.Servable = tc.listed, tc.servable
			if tc.complete {
				h.Complete = start
			}
			now = start.Add(tc.since)
			check(t, "readiness", ready(h), tc.wantReady)
			check(t, "liveness", live(h, now, l.started, l.livenessBound()), tc.wantAlive)
		})
	}
}

// TestHealthAsksStorage: Ready and Live judge the health storage publishes, not a copy of the loop's.
func TestHealthAsksStorage(t *testing.T) {
	store := storage.New(storage.Options{Source: "kubelet"})
	l, err := New(&fakeSource{budget: time.Second, outcome: storage.Outcome{Success: true}}, store,
		Options{Source: "kubelet", Resolution: time.Hour, PublishEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	check(t, "readiness before a cycle", l.Ready(), "has not finished")
	check(t, "liveness before a cycle", l.Live(), "")
	c := store.BeginCycle()
	c.Commit(storage.Outcome{Success: true})
	check(t, "readiness after a cycle", l.Ready(), "")
	check(t, "liveness after a cycle", l.Live(), "")
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
