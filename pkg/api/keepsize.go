package api

import (
	"unsafe"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// The keeper's estimates: the size of an entry, of a built item, of a watch event's item. A built item's
// containers each carry a ResourceList, a small map of quantities: resourceListBytes is what one costs on the heap
// with CPU, memory and swap (measured by TestKeeperEstimates).
const (
	resourceListBytes = 700
	buildOverhead     = 512 // the build itself, its key and its place in the cache
)

func entryBytes[P any](es []entry[P]) int64 {
	var e entry[P]
	return buildOverhead + int64(len(es))*int64(unsafe.Sizeof(e))
}

// listBytes estimates the items built from es, as a list or a page.
func listBytes[P any](es []entry[P]) int64 {
	var n int64
	for i := range es {
		switch p := any(es[i].point).(type) {
		case storage.PodPoint:
			n += int64(unsafe.Sizeof(metrics.PodMetrics{})) +
				int64(len(p.Names))*int64(unsafe.Sizeof(metrics.ContainerMetrics{})+resourceListBytes)
		default:
			n += int64(unsafe.Sizeof(metrics.NodeMetrics{})) + resourceListBytes
		}
	}
	return n
}

// eventBytes estimates n events and their items as watches carry them (their encodings are charged as made).
func eventBytes(n int) int64 {
	var i watchItem[struct{}]
	return int64(n) * int64(unsafe.Sizeof(i)+unsafe.Sizeof(watch.Event{})+8)
}
