package app

import (
	"os"
	"runtime/debug"
	"runtime/metrics"

	"k8s.io/klog/v2"
)

// defaultGCPercent is metrics-ring's GOGC when the environment sets none. Nearly all of its heap lives for many
// collections (rings, informer caches, the readers' snapshots) and a collection allocates little, so Go's default of
// 100, which lets the heap grow to twice the live data between collections, mostly buys resident memory that holds
// garbage. BENCHMARKS.md has the RSS and CPU measured at both settings. GOGC in the environment still wins.
const defaultGCPercent = 50

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
