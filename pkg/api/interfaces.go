package api

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// points reads servable metrics: storage itself, or one of its snapshots.
type points interface {
	Node(name string) (storage.NodePoint, bool)
	Pod(namespace, name string) (storage.PodPoint, bool)
}

// MetricsReader is the part of storage the REST handlers read. *storage.Storage implements it.
type MetricsReader interface {
	points
	// Unavailable is non-nil when list and get must answer 503 ServiceUnavailable with its message.
	Unavailable() error
}

// Versioned is storage that publishes snapshots (*storage.Storage does): a list reads one snapshot and carries its
// generation as resourceVersion, and a watch follows them.
type Versioned interface {
	Latest() storage.Snapshot
	At(generation uint64) (storage.Snapshot, bool)
}

// latest is the snapshot a request reads, with its resourceVersion ("" from storage without snapshots).
func latest(m MetricsReader) (points, string) {
	if v, ok := m.(Versioned); ok {
		snap := v.Latest()
		return snap, strconv.FormatUint(snap.Generation(), 10)
	}
	return m, ""
}

// HealthReader is the part of storage the health checks read. *storage.Storage implements it.
type HealthReader interface {
	// Ready reports whether the first collection cycle has finished, whatever its outcome.
	Ready() bool
	Health() storage.Health
}

// NodeLister lists nodes; a corev1 NodeLister from an informer implements it.
type NodeLister interface {
	List(selector labels.Selector) ([]*corev1.Node, error)
	Get(name string) (*corev1.Node, error)
}

// PodLister lists Running pods as metadata (*metav1.PartialObjectMetadata, or anything with an ObjectMeta); the
// GenericLister of a metadata informer filtered on status.phase=Running implements it.
type PodLister interface {
	List(selector labels.Selector) ([]runtime.Object, error)
	ByNamespace(namespace string) cache.GenericNamespaceLister
}
