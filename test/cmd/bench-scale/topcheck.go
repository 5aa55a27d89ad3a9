package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// topTally is what the soak's `kubectl top pods -A` runs found, checked against the simulator's truth.
type topTally struct {
	runs, failed   int
	maxTook        time.Duration
	rows           int
	wrong, missing int // rows whose values the truth contradicts; pods the truth has that no row shows
	extra          int // rows of pods the truth had neither before nor after the run: deleted, still served
	example        string
	errors         map[string]int
}

func (t *topTally) add(o topTally) {
	t.runs, t.failed, t.rows = t.runs+o.runs, t.failed+o.failed, t.rows+o.rows
	t.wrong, t.missing, t.extra = t.wrong+o.wrong, t.missing+o.missing, t.extra+o.extra
	t.maxTook = max(t.maxTook, o.maxTook)
	if t.example == "" {
		t.example = o.example
	}
	if t.errors == nil {
		t.errors = map[string]int{}
	}
	for k, n := range o.errors {
		t.errors[k] += n
	}
}

// runTop runs `kubectl top pods -A` through the aggregator and checks its rows: against the truth read before
// and after it (a pod churned meanwhile may rightly be there or not), values only of pods unchanged for settle
// (a rate over a window straddling a start or restart is not yet the truth's), CPU within 2m or 5 %, memory
// within the working set's wander (Config.FreshStats: up to 1/16 above) and kubectl's rounding.
func runTop(ctx context.Context, cp *framework.ControlPlane, sim *kubeletsim.Sim, settle time.Duration) topTally {
	r := topTally{runs: 1, errors: map[string]int{}}
	before := sim.Truth()
	start := time.Now()
	out, err := cp.KubectlOutput(ctx, "", "top", "pods", "-A", "--no-headers")
	r.maxTook = time.Since(start)
	after := sim.Truth()
	if err != nil {
		r.failed++
		r.errors["kubectl top: "+errKind(err)]++
		return r
	}
	seen := map[string]bool{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		r.rows++
		k := f[0] + "/" + f[1]
		seen[k] = true
		want, ok := after.Pods[k]
		if !ok {
			if _, was := before.Pods[k]; !was {
				r.extra++
				r.note(fmt.Sprintf("%s served, not in the truth", k))
			}
			continue
		}
		if changed, ok := after.Changed[k]; ok && time.Since(changed) < settle {
			continue
		}
		if msg := checkTopRow(want, f[2], f[3]); msg != "" {
			r.wrong++
			r.note(k + ": " + msg)
		}
	}
	for k := range before.Pods {
		_, still := after.Pods[k]
		changed, recent := after.Changed[k]
		if still && !seen[k] && (!recent || time.Since(changed) >= settle) {
			r.missing++
			r.note(k + " not served")
		}
	}
	return r
}

func (t *topTally) note(s string) {
	if t.example == "" {
		t.example = s
	}
}

// checkTopRow compares one row's CPU ("12m") and memory ("34Mi") with a pod's truth; "" when they agree.
func checkTopRow(want map[string]kubeletsim.Usage, cpuCol, memCol string) string {
	var cpuN, mem uint64
	for _, u := range want {
		cpuN, mem = cpuN+u.CPUNanoCores, mem+u.MemoryBytes
	}
	m, err1 := strconv.ParseFloat(strings.TrimSuffix(cpuCol, "m"), 64)
	mi, err2 := strconv.ParseFloat(strings.TrimSuffix(memCol, "Mi"), 64)
	if err1 != nil || err2 != nil || !strings.HasSuffix(cpuCol, "m") || !strings.HasSuffix(memCol, "Mi") {
		return fmt.Sprintf("unreadable row %q %q", cpuCol, memCol)
	}
	wantM := float64(cpuN) / 1e6
	if d := m - wantM; d > max(2, wantM/20) || d < -max(2, wantM/20) {
		return fmt.Sprintf("CPU %s, truth %.1fm", cpuCol, wantM)
	}
	lo, hi := float64(mem)/(1<<20)-1, float64(mem+mem/16)/(1<<20)+1
	if mi < lo || mi > hi {
		return fmt.Sprintf("memory %s, truth %.1fMi to %.1fMi", memCol, lo+1, hi-1)
	}
	return ""
}
