package collect

import (
	"fmt"
	"time"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// ReadyWithinCycles bounds how long readiness waits for a complete answer: once this many collection cycles have
// finished, the server is ready whatever they reached, so a kubelet that never answers cannot keep a replica
// unready. Cycles start every resolution, so that is about ReadyWithinCycles-1 resolutions after the first.
const ReadyWithinCycles = 4

// startupAllowance is added to the liveness bound before the first cycle has finished: the loop only starts once
// the informers have synced, which takes a while against a large cluster.
const startupAllowance = 2 * time.Minute

// MaxTimeout is the longest request timeout a resolution allows: metrics-server requires the kubelet request
// timeout below 90% of the resolution, and the Prometheus source follows the same rule.
func MaxTimeout(resolution time.Duration) time.Duration { return resolution * 9 / 10 }

// FitTimeout returns a default request timeout shortened to fit a short resolution, so --metric-resolution=1s
// just works; a timeout that was given is returned as it is, for validation to judge against MaxTimeout.
func FitTimeout(timeout, resolution time.Duration, given bool) time.Duration {
	if limit := MaxTimeout(resolution); !given && limit > 0 && timeout > limit {
		return limit
	}
	return timeout
}

// Ready reports why the server should not be ready yet, or nil (DESIGN.md section 3): the first collection cycle
// has finished and, for a source that counts nodes (kubelet), it has given the first complete answer (a cycle
// after which every listed node is served; storage.Health.Complete) or ReadyWithinCycles cycles have run,
// whichever comes first. A new replica of a rollout would otherwise become ready serving what its first cycle
// reached: no node at all (a node's CPU needs two samples), or a part of a large cluster while the first cycles'
// TLS handshakes outrun the CPU. It never fails again afterwards, whatever the sources do: an unready APIService
// breaks discovery for the whole cluster.
func (l *Loop) Ready() error { return ready(l.store.Latest().Health()) }

func ready(hl storage.Health) error {
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

// Live reports that the loop is stuck, or nil: no cycle has finished within the liveness bound of the previous one
// (or of the loop's construction, plus startupAllowance, before the first).
func (l *Loop) Live() error {
	return live(l.store.Latest().Health(), l.opts.Now(), l.started, l.livenessBound())
}

// livenessBound is how long after the newest finished cycle Live starts failing. Cycles start every resolution and
// each is cut off after the source's budget, so a working loop finishes one at least every resolution+budget;
// twice that tolerates one slow cycle without restarting a working process.
func (l *Loop) livenessBound() time.Duration { return 2 * (l.opts.Resolution + l.src.Budget()) }

func live(hl storage.Health, now, started time.Time, bound time.Duration) error {
	if hl.LastCycle.IsZero() {
		if since, grace := now.Sub(started), bound+startupAllowance; since > grace {
			return fmt.Errorf("no %s collection cycle has finished in %s since start (allowed %s)", hl.Source,
				since.Round(time.Second), grace)
		}
		return nil
	}
	if age := now.Sub(hl.LastCycle); age > bound {
		return fmt.Errorf("the last %s collection cycle finished %s ago, more than %s: the collection loop is stuck",
			hl.Source, age.Round(time.Second), bound)
	}
	return nil
}
