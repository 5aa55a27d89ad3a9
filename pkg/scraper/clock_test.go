package scraper

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestKubeletClockSkew: a kubelet's sample times are its own clock's. A clock far ahead of ours is served with
// its true timestamps and is not stale (staleness is our clock's), and a clock stepped back never rewinds a series:
// the newer sample stays served, with its usage, until the kubelet's time passes it again.
func TestKubeletClockSkew(t *testing.T) {
	var mu sync.Mutex
	var ts time.Time
	var cpu float64
	k := kubelet(t, func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		ms := ts.UnixMilli()
		fmt.Fprintf(w, "# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total %g %d\n", cpu, ms)
		fmt.Fprintf(w, "# TYPE node_memory_working_set_bytes gauge\nnode_memory_working_set_bytes %d %d\n", 1<<30, ms)
	})
	serve := func(at time.Time, c float64) {
		mu.Lock()
		ts, cpu = at, c
		mu.Unlock()
	}
	store := storage.New(storage.Options{Resolution: 10 * time.Second})
	s, err := New(Options{InsecureTLS: true, UseNodeStatusPort: true, Resolution: 10 * time.Second},
		&fakeLister{nodes: []*corev1.Node{nodeFor(t, "skewed", k)}}, store)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ahead := time.Now().Add(time.Hour).Truncate(time.Second)
	serve(ahead, 100)
	s.collect(ctx)
	serve(ahead.Add(10*time.Second), 105) // 0.5 cores
	s.collect(ctx)
	p, ok := store.Node("skewed")
	if !ok || !p.Timestamp.Equal(ahead.Add(10*time.Second)) || p.CPU != 500_000_000 || p.Window != 10*time.Second {
		t.Fatalf("a kubelet an hour ahead: served %v %+v, want 500m over 10s at its own time %v", ok, p, ahead.Add(10*time.Second))
	}

	serve(ahead.Add(-time.Minute), 90) // the kubelet's clock stepped back, and its counter with it
	s.collect(ctx)
	p, ok = store.Node("skewed")
	if !ok || !p.Timestamp.Equal(ahead.Add(10*time.Second)) || p.CPU != 500_000_000 {
		t.Fatalf("after the kubelet's clock went back: served %v %+v, want the newer sample kept", ok, p)
	}
	if h := store.Health(); h.LastError != nil || h.Cycles != 3 {
		t.Errorf("health %+v: a skewed clock is not a failed scrape", h)
	}
}
