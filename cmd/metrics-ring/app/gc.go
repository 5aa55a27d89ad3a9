package app

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"

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
// slowly: a minute after start-up at 1,000 nodes, about 100 MB of RSS was such heap. One forced collection, once.
func returnStartupMemory(ctx context.Context, first <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-first:
	}
	debug.FreeOSMemory()
	klog.V(1).InfoS("Returned the start-up peak's freed memory to the OS")
}
