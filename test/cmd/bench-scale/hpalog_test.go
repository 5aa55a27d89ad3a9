package main

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFailedSyncs: only the failed HPA syncs logged within the window count, each by its first error.
func TestFailedSyncs(t *testing.T) {
	log := `I1127 17:45:59.000000   1 controllermanager.go:1] "starting"
E1127 17:46:08.327203   19308 horizontal.go:354] "Unhandled Error" err="failed to compute desired number of replicas based on listed metrics for Deployment/sim-ns-8/w-165: invalid metrics (1 invalid out of 1), first error is: failed to get cpu utilization: no metrics returned from resource metrics API" logger="UnhandledError"
E1127 17:47:00.000001   19308 horizontal.go:354] "Unhandled Error" err="failed to compute desired number of replicas based on listed metrics for Deployment/sim-ns-1/w-2: invalid metrics (1 invalid out of 1), first error is: unable to fetch metrics: 503" logger="UnhandledError"
E1127 17:47:30.000000   19308 horizontal.go:354] "Unhandled Error" err="failed to compute desired number of replicas based on listed metrics for Deployment/sim-ns-2/w-3: invalid metrics (1 invalid out of 1), first error is: unable to fetch metrics: 503" logger="UnhandledError"
E1127 17:48:00.000000   19308 horizontal.go:354] "Unhandled Error" err="failed to compute desired number of replicas: invalid metrics (1 invalid out of 1), first error is: unable to fetch metrics: 503" logger="UnhandledError"
E1127 17:52:00.000000   19308 horizontal.go:354] "Unhandled Error" err="failed to compute desired number of replicas based on listed metrics for Deployment/sim-ns-2/w-3: invalid metrics (1 invalid out of 1), first error is: after the window" logger="UnhandledError"
`
	file := filepath.Join(t.TempDir(), "kube-controller-manager.log")
	if err := os.WriteFile(file, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 27, 17, 46, 30, 0, time.UTC)
	r, err := failedSyncs(file, from, from.Add(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if r.n != 3 || r.causes["unable to fetch metrics: 503"] != 3 || len(r.causes) != 1 {
		t.Errorf("%d failed syncs %v, want 3 of unable to fetch metrics: 503", r.n, r.causes)
	}
	// One HPA failing at every sync reads apart from many failing once; a line naming no target is no HPA.
	if want := map[string]int{"Deployment/sim-ns-1/w-2": 1, "Deployment/sim-ns-2/w-3": 1}; !maps.Equal(r.targets, want) || r.untargeted != 1 {
		t.Errorf("failed syncs by target %v and %d naming none, want %v and 1", r.targets, r.untargeted, want)
	}
	if want := map[int]int{0: 1, 1: 2}; !maps.Equal(r.byMinute, want) {
		t.Errorf("failed syncs by minute %v, want %v", r.byMinute, want)
	}
}
