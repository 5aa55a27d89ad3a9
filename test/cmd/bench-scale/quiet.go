package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// Each server should start on a machine as quiet as the next one gets. Right after the registration of 300,000
// pods, kube-apiserver and etcd kept both cores busy for minutes; the first server's warm-up then reached only part
// of the nodes while the baseline's, minutes later, reached all of them, so the two measured different phases of
// start-up (BENCHMARKS.md, issue 17's memory round). So before each server starts, the benchmark waits until the
// control plane and the simulator together use less than quietCores, or -settle-max has passed.
const (
	quietCores = 0.3
	quietEvery = 5 * time.Second
)

// waitQuiet waits for the processes in procs (name to pid) to use less than quietCores together over one
// quietEvery, at most limit, and says how long it waited and at what load.
func waitQuiet(ctx context.Context, out io.Writer, procs map[string]int, limit time.Duration) {
	if limit <= 0 {
		return
	}
	cpu := func() time.Duration {
		var total time.Duration
		for _, pid := range procs {
			if st, err := framework.ReadProcStat(pid); err == nil { // a process that is gone uses nothing
				total += st.CPU
			}
		}
		return total
	}
	tick := time.NewTicker(quietEvery)
	defer tick.Stop()
	waited, cores, quiet := untilQuiet(ctx, cpu, tick.C, time.Now, limit)
	if quiet {
		fmt.Fprintf(out, "the control plane settled after %s (%.2f cores)\n", waited.Round(time.Second), cores)
	} else {
		fmt.Fprintf(out, "the control plane still used %.2f cores after %s: measuring anyway\n", cores, waited.Round(time.Second))
	}
}

// untilQuiet reads the processes' total CPU time at each tick and returns once it grew by less than quietCores
// per second of wall time since the previous tick, or when limit has passed (quiet false), or ctx ended.
func untilQuiet(ctx context.Context, cpu func() time.Duration, ticks <-chan time.Time, now func() time.Time,
	limit time.Duration) (waited time.Duration, cores float64, quiet bool) {
	start := now()
	prevCPU, prevAt := cpu(), start
	for {
		select {
		case <-ctx.Done():
			return now().Sub(start), cores, false
		case <-ticks:
		}
		c, at := cpu(), now()
		if d := at.Sub(prevAt); d > 0 {
			cores = (c - prevCPU).Seconds() / d.Seconds()
		}
		prevCPU, prevAt = c, at
		if cores < quietCores {
			return at.Sub(start), cores, true
		}
		if at.Sub(start) >= limit {
			return at.Sub(start), cores, false
		}
	}
}
