package api

import (
	"errors"
	"testing"
)

// fakeCollection is the collection loop's health policy, as collect.Loop answers it.
type fakeCollection struct{ ready, live error }

func (f fakeCollection) Ready() error { return f.ready }
func (f fakeCollection) Live() error  { return f.live }

// TestHealthChecks: readiness waits for the informers, then passes on the collection loop's answer, as liveness
// does. This is wiring only: what the loop answers (the health policy) is pkg/collect's, tested there.
func TestHealthChecks(t *testing.T) {
	notYet, stuck := errors.New("the first kubelet collection cycle has not finished yet"),
		errors.New("the collection loop is stuck")
	tests := []struct {
		name       string
		synced     bool
		collection fakeCollection
	}{
		{name: "starting: informers not synced", collection: fakeCollection{ready: notYet}},
		{name: "informers not synced, loop ready"},
		{name: "synced, first cycle running", synced: true, collection: fakeCollection{ready: notYet}},
		{name: "ready", synced: true},
		{name: "loop stuck", synced: true, collection: fakeCollection{live: stuck}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHealthChecks(tc.collection, func() bool { return tc.synced })
			if err := h.informersSynced(nil); (err == nil) != tc.synced {
				t.Errorf("informers: %v, with the informers synced %v", err, tc.synced)
			}
			err := h.firstCycleDone(nil)
			switch {
			case !tc.synced && (err == nil || errors.Is(err, notYet)):
				t.Errorf("readiness before the informers synced: %v, want a failure of its own", err)
			case tc.synced && !errors.Is(err, tc.collection.ready):
				t.Errorf("readiness: %v, want the loop's %v", err, tc.collection.ready)
			}
			if err := h.collectionTimely(nil); !errors.Is(err, tc.collection.live) {
				t.Errorf("liveness: %v, want the loop's %v", err, tc.collection.live)
			}
		})
	}
}
