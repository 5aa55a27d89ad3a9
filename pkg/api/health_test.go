package api

import (
	"errors"
	"strings"
	"testing"
)

// fakeCollection is the collection loop's health policy, as collect.Loop answers it.
type fakeCollection struct{ ready, live error }

func (f fakeCollection) Ready() error { return f.ready }
func (f fakeCollection) Live() error  { return f.live }

// TestHealthChecks: readiness waits for the informers, then asks the collection loop, as liveness does.
func TestHealthChecks(t *testing.T) {
	notYet, stuck := errors.New("the first kubelet collection cycle has not finished yet"),
		errors.New("the collection loop is stuck")
	tests := []struct {
		name                                string
		synced                              bool
		collection                          fakeCollection
		wantInformers, wantReady, wantAlive string // "" means the check passes
	}{
		{name: "starting: informers not synced", collection: fakeCollection{ready: notYet},
			wantInformers: "not synced", wantReady: "informers"},
		{name: "synced, first cycle running", synced: true, collection: fakeCollection{ready: notYet},
			wantReady: "first kubelet collection cycle has not finished"},
		{name: "ready", synced: true},
		{name: "loop stuck", synced: true, collection: fakeCollection{live: stuck}, wantAlive: "collection loop is stuck"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHealthChecks(tc.collection, func() bool { return tc.synced })
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
