package api

import (
	"fmt"
	"net/http"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"
)

// Health check names, as listed by /readyz?verbose and /livez?verbose.
const (
	checkInformerSync     = "informer-sync"
	checkMetricCollection = "metric-collection"
	checkCollectionTimely = "metric-collection-timely"
)

// Collection is the collection loop's health policy (collect.Loop): the API asks it rather than judging storage's
// health itself. Each returns nil when healthy, else why not.
type Collection interface {
	Ready() error
	Live() error
}

// healthChecks implements the checks of DESIGN.md section 3: the informers' sync here, the rest by asking the
// collection loop.
type healthChecks struct {
	collection Collection
	synced     func() bool
}

func newHealthChecks(c Collection, synced func() bool) *healthChecks {
	if synced == nil {
		synced = func() bool { return true }
	}
	return &healthChecks{collection: c, synced: synced}
}

// readyz returns the readiness checks: informers synced, then the collection's (Collection.Ready).
func (h *healthChecks) readyz() []healthz.HealthChecker {
	return []healthz.HealthChecker{
		healthz.NamedCheck(checkInformerSync, h.informersSynced),
		healthz.NamedCheck(checkMetricCollection, h.firstCycleDone),
	}
}

// livez returns the liveness check: the collection loop keeps finishing cycles.
func (h *healthChecks) livez() []healthz.HealthChecker {
	return []healthz.HealthChecker{healthz.NamedCheck(checkCollectionTimely, h.collectionTimely)}
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
	return h.collection.Ready()
}

func (h *healthChecks) collectionTimely(*http.Request) error {
	err := h.collection.Live()
	if err != nil {
		klog.ErrorS(err, "Liveness check failed", "check", checkCollectionTimely)
	}
	return err
}
