package api

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Snapshots is storage as the API reads it (*storage.Storage implements it). A request loads one snapshot and
// reads everything from it: the 503 decision (its health) and the values, so the two always come from the same
// collection. A list's resourceVersion is that snapshot's generation; pages and resumed watches read the snapshot
// it names while storage keeps it. How long a snapshot is kept is storage's business: it says which it keeps of its
// own accord (Snapshot.Retained), a reader that needs one kept longer holds it (Hold) and releases it when done; the
// API counts no generations to guess.
type Snapshots interface {
	// Latest is the newest snapshot, which a request without a resourceVersion reads.
	Latest() storage.Snapshot
	// Committed is the newest snapshot of a whole collection cycle, which a paged list starts from (paginate.go).
	Committed() storage.Snapshot
	// Resolve finds the snapshot a client's resourceVersion or continue token names, by its generation, while
	// storage keeps it (Retained, or held by a reader); false when it does not.
	Resolve(generation uint64) (storage.Snapshot, bool)
	// Hold keeps a snapshot retained until the handle is released (a nil handle releases nothing); false when
	// storage retains it no longer.
	Hold(storage.Snapshot) (*storage.Handle, bool)
	// Removals counts the objects the informers removed that storage held series of, counted before the
	// publication that leaves them out: what was joined with the informers' objects before the count grew (a build)
	// may hold an object since gone, whatever snapshot it read.
	Removals() uint64
	// RemovedAfter names the objects removed after Removals was count, up to the count returned: a build that
	// lists none of them holds no object since gone. ok is false when storage no longer recalls them all.
	RemovedAfter(count uint64) (removed []storage.Removal, upTo uint64, ok bool)
}

// NodeLister lists nodes; a corev1 NodeLister from an informer implements it.
type NodeLister interface {
	List(selector labels.Selector) ([]*corev1.Node, error)
	Get(name string) (*corev1.Node, error)
}

// PodLister lists Running pods as metadata (any metav1.Object: *metav1.PartialObjectMetadata, cmd's runningPod);
// PodIndex implements it (cmd serves it), as does the GenericLister of an informer of Running pods that indexes them
// by namespace (tests).
type PodLister interface {
	List(selector labels.Selector) ([]runtime.Object, error)
	ByNamespace(namespace string) cache.GenericNamespaceLister
}
