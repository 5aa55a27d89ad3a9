package api

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"
)

// Health check names, as listed by /readyz?verbose and /livez?verbose.
const (
	CheckInformerSync     = "informer-sync"
	CheckMetricCollection = "metric-collection"
	CheckCollectionTimely = "metric-collection-timely"
)

// LivenessBound is how long after the newest finished collection cycle /livez starts failing. Cycles start every
// resolution and each is cut off after the request timeout, so a healthy loop finishes one at least every
// resolution+timeout; twice that tolerates one slow cycle without restarting a working process.
func LivenessBound(resolution, timeout time.Duration) time.Duration {
	return 2 * (resolution + timeout)
}

// startupAllowance is added to LivenessBound before the first cycle has finished: the loop only starts once the
// informers have synced, which takes a while against a large cluster.
const startupAllowance = 2 * time.Minute

// healthChecks implements the checks of DESIGN.md section 3.
type healthChecks struct {
	snaps  Snapshots
	synced func() bool
	bound  time.Duration
	grace  time.Duration
	start  time.Time
	now    func() time.Time
}

func newHealthChecks(snaps Snapshots, synced func() bool, resolution, timeout time.Duration, now func() time.Time) *healthChecks {
	if now == nil {
		now = time.Now
	}
	if synced == nil {
		synced = func() bool { return true }
	}
	bound := LivenessBound(resolution, timeout)
	return &healthChecks{snaps: snaps, synced: synced, bound: bound, grace: bound + startupAllowance, start: now(), now: now}
}

// ReadyWithinCycles bounds how long readiness waits for a complete answer: once this many collection cycles have
// finished, the server is ready whatever they reached, so a kubelet that never answers cannot keep a replica
// unready. Cycles start every resolution, so that is about ReadyWithinCycles-1 resolutions after the first.
const ReadyWithinCycles = 4

// readyz returns the readiness checks: informers synced, then the first collection cycle finished and, for a source
// that counts nodes (kubelet), the first complete answer (a cycle after which every listed node is served; see
// storage.Health.Complete) or ReadyWithinCycles cycles, whichever comes first. A new
// replica of a rollout would otherwise become ready serving what its first cycle reached: no node at all (a node's
// CPU needs two samples), and at 10,000 nodes, where the first cycles' TLS handshakes outrun two cores, a third of
// them for a minute or two. Neither check ever fails again afterwards, whatever the kubelets do: an unready
// APIService breaks discovery for the whole cluster.
func (h *healthChecks) readyz() []healthz.HealthChecker {
	return []healthz.HealthChecker{
		healthz.NamedCheck(CheckInformerSync, h.informersSynced),
		healthz.NamedCheck(CheckMetricCollection, h.firstCycleDone),
	}
}

// livez returns the liveness check: the collection loop keeps finishing cycles.
func (h *healthChecks) livez() []healthz.HealthChecker {
	return []healthz.HealthChecker{healthz.NamedCheck(CheckCollectionTimely, h.collectionTimely)}
}

func (h *healthChecks) informersSynced(*http.Request) error {
	if !h.synced() {
		return fmt.Errorf("node and pod informers have not synced yet")
	}
	return nil
}

func (h *healthChecks) firstCycleDone(*http.Request) error {
	if !h.synced() {
		return fmt.Errorf("waiting for informers to sync before the first collection")
	}
	hl := h.snaps.Latest().Health()
	switch {
	case hl.Cycles == 0:
		return fmt.Errorf("the first %s collection cycle has not finished yet", hl.Source)
	case hl.Complete.IsZero() && hl.Cycles < ReadyWithinCycles && hl.Listed > 0:
		return fmt.Errorf("waiting for a complete answer: after %d %s collection cycles, %d of %d nodes are served "+
			"(%d answered the last cycle); ready anyway after %d cycles", hl.Cycles, hl.Source, hl.Servable,
			hl.Listed, hl.Reached, ReadyWithinCycles)
	}
	return nil
}

func (h *healthChecks) collectionTimely(*http.Request) error {
	hl := h.snaps.Latest().Health()
	now := h.now()
	if hl.LastCycle.IsZero() {
		if since := now.Sub(h.start); since > h.grace {
			err := fmt.Errorf("no %s collection cycle has finished in %s since start (allowed %s)", hl.Source,
				since.Round(time.Second), h.grace)
			klog.ErrorS(err, "Liveness check failed", "check", CheckCollectionTimely)
			return err
		}
		return nil
	}
	if age := now.Sub(hl.LastCycle); age > h.bound {
		err := fmt.Errorf("the last %s collection cycle finished %s ago, more than %s: the collection loop is stuck",
			hl.Source, age.Round(time.Second), h.bound)
		klog.ErrorS(err, "Liveness check failed", "check", CheckCollectionTimely)
		return err
	}
	return nil
}
