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

// TestKubeletClockSkew: a kubelet's sample times are its own clock's, and DESIGN.md section 2's clock rules hold
// through the scraper: a clock far ahead of ours is served with its own timestamps and is fresh on our clock; set
// back by more than --stale-after (an hour ahead, then fixed), the series starts afresh and the next scrape is
// served at the true time with the true values; set back a little, the newer sample stays served until the
// kubelet's time passes it. Resolution 10 s, stale-after 30 s.
func TestKubeletClockSkew(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	type scrape struct {
		ts       time.Time // the kubelet's clock
		cpu, mem float64
		served   bool
		wantTS   time.Time
		wantCPU  uint64 // nanocores
		wantMem  uint64
	}
	ahead := now.Add(time.Hour)
	cases := []struct {
		name    string
		scrapes []scrape
	}{
		{name: "an hour ahead for three scrapes, then fixed",
			scrapes: []scrape{
				{ts: ahead, cpu: 100, mem: 2 << 30},
				{ts: ahead.Add(10 * time.Second), cpu: 105, mem: 2 << 30, served: true, wantTS: ahead.Add(10 * time.Second), wantCPU: 500_000_000, wantMem: 2 << 30},
				{ts: ahead.Add(20 * time.Second), cpu: 110, mem: 2 << 30, served: true, wantTS: ahead.Add(20 * time.Second), wantCPU: 500_000_000, wantMem: 2 << 30},
				{ts: now.Add(30 * time.Second), cpu: 115, mem: 1 << 30},
				{ts: now.Add(40 * time.Second), cpu: 117, mem: 1 << 30, served: true, wantTS: now.Add(40 * time.Second), wantCPU: 200_000_000, wantMem: 1 << 30},
			}},
		{name: "stepped back a little: ignored until it passes the newest sample",
			scrapes: []scrape{
				{ts: now, cpu: 100, mem: 1 << 30},
				{ts: now.Add(10 * time.Second), cpu: 105, mem: 1 << 30, served: true, wantTS: now.Add(10 * time.Second), wantCPU: 500_000_000, wantMem: 1 << 30},
				{ts: now.Add(5 * time.Second), cpu: 106, mem: 2 << 30, served: true, wantTS: now.Add(10 * time.Second), wantCPU: 500_000_000, wantMem: 1 << 30},
				{ts: now.Add(20 * time.Second), cpu: 109, mem: 2 << 30, served: true, wantTS: now.Add(20 * time.Second), wantCPU: 400_000_000, wantMem: 2 << 30},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var cur scrape
			k := kubelet(t, func(w http.ResponseWriter, _ *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				ms := cur.ts.UnixMilli()
				fmt.Fprintf(w, "# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total %g %d\n", cur.cpu, ms)
				fmt.Fprintf(w, "# TYPE node_memory_working_set_bytes gauge\nnode_memory_working_set_bytes %g %d\n", cur.mem, ms)
			})
			ours := now // our clock: one resolution per scrape, whatever the kubelet's says
			store := storage.New(storage.Options{Resolution: 10 * time.Second, Now: func() time.Time { return ours }})
			s, err := newScraper(Options{InsecureTLS: true, UseNodeStatusPort: true},
				&fakeLister{nodes: []*corev1.Node{nodeFor(t, "skewed", k)}}, stored{store})
			if err != nil {
				t.Fatal(err)
			}
			for i, sc := range tc.scrapes {
				mu.Lock()
				cur = sc
				mu.Unlock()
				ours = now.Add(time.Duration(i) * 10 * time.Second)
				s.collect(context.Background())
				p, ok := store.Latest().Node("skewed")
				if ok != sc.served {
					t.Fatalf("scrape %d (kubelet time %s): served = %v, want %v (%+v)", i, sc.ts.Sub(now), ok, sc.served, p)
				}
				if ok && (!p.Timestamp.Equal(sc.wantTS) || p.CPU != sc.wantCPU || p.Memory != sc.wantMem) {
					t.Errorf("scrape %d: served %s cpu=%d mem=%d, want %s cpu=%d mem=%d", i, p.Timestamp.Sub(now), p.CPU,
						p.Memory, sc.wantTS.Sub(now), sc.wantCPU, sc.wantMem)
				}
			}
			if h := store.Latest().Health(); h.LastError != nil || h.Cycles != uint64(len(tc.scrapes)) {
				t.Errorf("health %+v: a skewed clock is not a failed scrape", h)
			}
		})
	}
}
