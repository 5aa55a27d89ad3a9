package app

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/klog/v2"
)

// defaultGCPercent is metrics-ring's GOGC when the environment sets none. Nearly all of its heap lives for many
// collections (rings, informer caches, the readers' snapshots) and a collection allocates little, so Go's default of
// 100, which lets the heap grow to twice the live data between collections, mostly buys resident memory that holds
// garbage; and because the garbage collector's CPU follows the allocation rate, not the live heap, a low percent
// costs little. BENCHMARKS.md has RSS and CPU measured at 50 and 25. GOGC in the environment still wins.
const defaultGCPercent = 25

// setGCPercent applies defaultGCPercent unless GOGC is set, and returns the percent in effect.
func setGCPercent() int {
	if v, ok := os.LookupEnv("GOGC"); ok {
		klog.V(1).InfoS("Garbage collection target from the environment", "GOGC", v)
		// Read, not set: the runtime has parsed GOGC already ("off" reads as -1).
		sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(sample)
		return int(sample[0].Value.Uint64())
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}

// returnStartupMemory hands the start-up peak back to the OS once the first collection cycle has finished (first
// is closed then). By that time the informers' initial lists (every pod, managed fields and all, before trimming)
// and the first cycle's connection set-up are garbage, but the runtime's background scavenger returns freed heap
// slowly (BENCHMARKS.md, "Figures behind the comments"). One forced collection, then a
// few looks (settle) for what later start-up cycles leave.
func returnStartupMemory(ctx context.Context, first <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-first:
	}
	debug.FreeOSMemory()
	klog.V(1).InfoS("Returned the start-up peak's freed memory to the OS")
	tick := time.NewTicker(settleEvery)
	defer tick.Stop()
	settle(ctx, tick.C, settleChecks, readHeap, debug.FreeOSMemory)
}

// Start-up does not always end with the first cycle: in a large cluster the first cycles each reach a part of the
// nodes while the other handshakes go on (BENCHMARKS.md), and each of them leaves its set-up as
// garbage, which the scavenger was still returning when RSS was read a minute later. So for two minutes after the
// first cycle, settle looks every 15 s and returns freed heap when much more of it is idle than the heap will grow
// into before its next garbage collection. In a steady state the scavenger keeps that excess under about a tenth
// of the heap goal, so these looks cost nothing but a read of runtime metrics.
const (
	settleEvery  = 15 * time.Second
	settleChecks = 8
	minReturn    = 32 << 20
)

// heapStats is what settle reads of the runtime, in bytes.
type heapStats struct {
	free    uint64 // freed heap still backed by memory (/memory/classes/heap/free)
	objects uint64 // heap objects, live or not yet swept
	goal    uint64 // the heap size at which the next garbage collection starts
}

func readHeap() heapStats {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return heapStats{free: s[0].Value.Uint64(), objects: s[1].Value.Uint64(), goal: s[2].Value.Uint64()}
}

// idleExcess is the freed heap beyond what the heap grows into before its next collection.
func (h heapStats) idleExcess() uint64 {
	headroom := h.goal - min(h.goal, h.objects)
	return h.free - min(h.free, headroom)
}

// worthReturning says whether the excess is start-up garbage rather than the scavenger's steady-state allowance.
func (h heapStats) worthReturning() bool {
	ex := h.idleExcess()
	return ex >= minReturn && ex >= h.goal/8
}

// settle reads the heap at each of checks ticks and calls free when the excess is worth returning. It returns
// how often it did.
func settle(ctx context.Context, ticks <-chan time.Time, checks int, read func() heapStats, free func()) int {
	returned := 0
	for range checks {
		select {
		case <-ctx.Done():
			return returned
		case <-ticks:
		}
		if h := read(); h.worthReturning() {
			free()
			returned++
			klog.V(1).InfoS("Returned freed start-up memory to the OS", "bytes", h.idleExcess())
		}
	}
	return returned
}
