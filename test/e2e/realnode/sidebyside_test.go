package realnode

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// podTotal is a reading's key for the pod's sum over its containers (the pod's own cgroup on the cgroup side).
const podTotal = "(pod)"

// reading is one server's answer for a pod: its sample time and window, and CPU (cores) and memory (bytes) by
// container, podTotal included.
type reading struct {
	ts     time.Time
	window time.Duration
	cpu    map[string]float64
	mem    map[string]int64
	// ratio is cpu over the cgroups' rate over the same window, the nearest of the rates the timestamp's second
	// allows (1 within them; set by checkAgainstCgroups). Not the middle of them: on busy cores they span up to
	// 10 %, and a right value at the top of that range once compared 8.8 % above metrics-server's at the middle.
	ratio map[string]float64
	// cgroup is the range of the cgroups' rate over the window (lo, hi; set by checkAgainstCgroups).
	cgroup map[string][2]float64
}

// TestSideBySideWithMetricsServer: a pod of two burning containers on the real node, read from metrics-ring (v1,
// through the aggregator) and from metrics-server v0.9.0 scraping the same kubelet in the same run. Each
// server's CPU, per container and summed for the pod, is within 5 % of the cgroups' own cpuacct.usage over the
// window that server reports. The two never read the same kubelet sample (this kubelet takes a fresh one per
// request, and their windows differ: 5 s and 10 s), and a burn sharing busy cores changes its rate from one
// window to the next: so they are compared by how far each is from the cgroups over its own window (within 5 %
// of each other), and by memory (a steady hold: within 2 %). It ends with the pairs as a table (lines "side by
// side:"), for BENCHMARKS.md.
func TestSideBySideWithMetricsServer(t *testing.T) {
	needNode(t)
	const name = "side-by-side"
	p := createPod(t, podOn(name, workload("a", "-millicores=200", "-memory-mib=40"), workload("b", "-millicores=100", "-memory-mib=24")), allRunning)
	samplers := map[string]*framework.CgroupSampler{}
	dirs := map[string]string{}
	for _, c := range []string{"a", "b"} {
		dirs[c] = cgroupOf(t, p, c)
		samplers[c] = framework.SampleCgroup(dirs[c])
	}
	// runc puts each container in a child of the pod's cgroup (which also holds the pause container).
	dirs[podTotal] = filepath.Dir(dirs["a"])
	samplers[podTotal] = framework.SampleCgroup(dirs[podTotal])
	defer func() {
		for _, s := range samplers {
			s.Stop()
		}
	}()

	readings := map[string]map[time.Time]reading{"metrics-ring": {}, "metrics-server": {}}
	var table []string
	framework.Eventually(t, "3 windows of metrics-ring and 2 of metrics-server checked against the cgroups, and paired", 3*time.Minute, func(ctx context.Context) error {
		ring, err := podMetrics(ctx, name)
		if err != nil {
			return fmt.Errorf("metrics-ring: %w", err)
		}
		ms, err := msPodMetrics(ctx, name)
		if err != nil {
			return err
		}
		got := map[string]reading{"metrics-ring": toReading(ring.Timestamp.Time, ring.Window.Duration, ring.Containers)}
		got["metrics-server"] = toReadingBeta(ms)
		for server, r := range got {
			if _, done := readings[server][r.ts]; done {
				continue
			}
			if err := checkAgainstCgroups(t, server, &r, samplers); err != nil {
				t.Logf("%s at %s: not checked: %v", server, r.ts.Format(time.StampMilli), err)
				continue
			}
			readings[server][r.ts] = r
			if server == "metrics-server" {
				if other, ok := nearest(readings["metrics-ring"], r.ts); ok {
					compareServers(t, other, r)
					table = append(table, sideBySide(other, r, dirs)...)
				}
			}
		}
		if n, m, pairs := len(readings["metrics-ring"]), len(readings["metrics-server"]), len(table)/len(samplers); n < 3 || m < 2 || pairs < 2 {
			return fmt.Errorf("checked %d windows of metrics-ring, %d of metrics-server, %d pairs", n, m, pairs)
		}
		return nil
	})
	t.Log("side by side: | container | cgroup CPU over metrics-ring's window | metrics-ring | cgroup CPU over metrics-server's window | metrics-server | cgroup working set | metrics-ring memory | metrics-server memory |")
	for _, row := range table {
		t.Log("side by side: " + row)
	}
}

// sideBySide is a pair's rows of the table the test ends with, one per container and the pod: CPU in millicores
// (the cgroups' as the range RateRange gives), memory in MiB (the cgroups' working set read now: a steady hold).
func sideBySide(ring, ms reading, dirs map[string]string) []string {
	var rows []string
	for _, c := range sortedKeys(ms.cpu) {
		ws := "?"
		if b, err := framework.WorkingSet(dirs[c]); err == nil {
			ws = fmt.Sprintf("%.1f", float64(b)/(1<<20))
		}
		rc, mc := ring.cgroup[c], ms.cgroup[c]
		rows = append(rows, fmt.Sprintf("| %s | %.1f-%.1f m (%.0f s) | %.1f m | %.1f-%.1f m (%.0f s) | %.1f m | %s MiB | %.1f MiB | %.1f MiB |",
			c, 1000*rc[0], 1000*rc[1], ring.window.Seconds(), 1000*ring.cpu[c], 1000*mc[0], 1000*mc[1], ms.window.Seconds(), 1000*ms.cpu[c],
			ws, float64(ring.mem[c])/(1<<20), float64(ms.mem[c])/(1<<20)))
	}
	return rows
}

// cgroupOf is the cpuacct cgroup of the pod's container c.
func cgroupOf(t *testing.T, p *corev1.Pod, c string) string {
	t.Helper()
	id, err := containerID(p, c)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := containerCgroup(id)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkAgainstCgroups compares r's CPU with the cgroups' over r's window (wherever its end lies within the
// timestamp's second: see framework.CgroupSampler.RateRange); an error means the samplers do not cover that yet (r is then not counted).
func checkAgainstCgroups(t *testing.T, server string, r *reading, samplers map[string]*framework.CgroupSampler) error {
	t.Helper()
	type bounds struct{ lo, hi float64 }
	want := map[string]bounds{}
	for c, s := range samplers {
		lo, hi, err := s.RateRange(r.ts, r.window)
		if err != nil {
			return err
		}
		want[c] = bounds{lo, hi}
	}
	for _, c := range sortedKeys(samplers) {
		got, ok := r.cpu[c]
		if !ok {
			t.Errorf("%s at %s serves no container %s", server, r.ts.Format(time.StampMilli), c)
			continue
		}
		w := want[c]
		off := framework.OffRange(got, w.lo, w.hi)
		r.ratio[c] = 1 + off
		r.cgroup[c] = [2]float64{w.lo, w.hi}
		t.Logf("%-14s window %5s ending %s+<1s %-6s: served %.4f cores, cgroup %.4f to %.4f (%+.2f%% off), memory %d",
			server, r.window.Round(time.Millisecond), r.ts.Format("15:04:05"), c, got, w.lo, w.hi, 100*off, r.mem[c])
		if math.Abs(off) > cpuTolerance {
			t.Errorf("%s, window of %s ending %s+<1s, %s: served %.4f cores, the cgroup used %.4f to %.4f (%+.1f%%, over %.0f%%)",
				server, r.window, r.ts.Format(time.RFC3339), c, got, w.lo, w.hi, 100*off, 100*cpuTolerance)
		}
	}
	return nil
}

// compareServers checks metrics-server's reading ms against metrics-ring's ring (the nearest in time): each one's
// CPU over the cgroups' over its own window within 5 % of the other's, and memory within 2 %.
func compareServers(t *testing.T, ring, ms reading) {
	t.Helper()
	for _, c := range sortedKeys(ms.cpu) {
		diff := ring.ratio[c] - ms.ratio[c]
		mem := float64(ring.mem[c]-ms.mem[c]) / float64(ms.mem[c])
		t.Logf("pair %s/%s %-6s: metrics-ring %.4f cores (%.4f of its cgroup window), metrics-server %.4f (%.4f): %+.2f%%; memory %d / %d (%+.2f%%)",
			ring.ts.Format("15:04:05.000"), ms.ts.Format("15:04:05.000"), c, ring.cpu[c], ring.ratio[c], ms.cpu[c], ms.ratio[c], 100*diff, ring.mem[c], ms.mem[c], 100*mem)
		if math.Abs(diff) > cpuTolerance {
			t.Errorf("%s: metrics-ring serves %.4f of the cgroups' CPU (sample %s), metrics-server %.4f (sample %s): %+.1f%%, over %.0f%%",
				c, ring.ratio[c], ring.ts.Format(time.StampMilli), ms.ratio[c], ms.ts.Format(time.StampMilli), 100*diff, 100*cpuTolerance)
		}
		if math.Abs(mem) > 0.02 {
			t.Errorf("%s: metrics-ring serves memory %d (sample %s), metrics-server %d (sample %s): %+.1f%%, over 2%%",
				c, ring.mem[c], ring.ts.Format(time.StampMilli), ms.mem[c], ms.ts.Format(time.StampMilli), 100*mem)
		}
	}
}

// nearest is the reading whose time is nearest ts, within 15 s (a steady burn's rate does not move in that).
func nearest(rs map[time.Time]reading, ts time.Time) (reading, bool) {
	var best reading
	found := false
	for at, r := range rs {
		if d := at.Sub(ts).Abs(); d <= 15*time.Second && (!found || d < best.ts.Sub(ts).Abs()) {
			best, found = r, true
		}
	}
	return best, found
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
