package api

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// object is what the informers say of one node or pod: its key and labels. The labels map is the informer's own,
// shared and never modified (informers replace objects, they do not edit them).
type object struct {
	namespace, name string
	labels          map[string]string
	// uid is which object it is, when its lister says (IdentifiedPod): storage's number for it (storage.PodPoint.UID),
	// 0 when unknown.
	uid uint64
}

// key is the object's sort and continue key: "name", or "namespace/name".
func (o *object) key() string {
	if o.namespace == "" {
		return o.name
	}
	return o.namespace + "/" + o.name
}

// less orders objects as lists are served: by namespace, then name.
func (o *object) less(p *object) bool {
	if o.namespace != p.namespace {
		return o.namespace < p.namespace
	}
	return o.name < p.name
}

// entry is one selected object with its servable metrics in one snapshot: a few words, pointing into the snapshot
// and the informer's labels, so a selection of every pod of a large cluster costs little to keep.
type entry[P any] struct {
	object
	point P
}

// kindInfo names a resource as the generic server and clients see it.
type kindInfo struct {
	resource   schema.GroupResource
	kind       string
	singular   string
	namespaced bool
	newItem    func() runtime.Object
	newList    func() runtime.Object
}

// kind is the part of the REST storage that differs between NodeMetrics and PodMetrics; everything else (list,
// page, get, watch, table, sharing) is metricsREST's, once for both.
type kind[P any] interface {
	info() kindInfo
	// objects lists the informers' objects in namespace ("" for all) whose labels match sel.
	objects(namespace string, sel labels.Selector) ([]object, error)
	// essential returns sel without the requirements no object of namespace can fail now (dropped), or sel itself:
	// a list whose selector says no more than another's reads its build (essential.go).
	essential(namespace string, sel labels.Selector) (_ labels.Selector, dropped bool)
	// object looks one object up; ok is false when it does not exist (deleted, or a pod no longer Running).
	object(namespace, name string) (o object, ok bool, err error)
	// point reads the object's servable metrics from a snapshot: none when they were measured for another object
	// under its name.
	point(snap storage.Snapshot, o *object) (P, bool)
	// same reports whether two points carry the same values, so a watch sends MODIFIED only for new samples.
	same(a, b *P) bool
	// item builds the API object of one entry.
	item(e *entry[P], rv string, created metav1.Time) runtime.Object
	// appendJSON appends the compact JSON of one entry's item in a list, as the apiserver's encoder writes it
	// (itemjson.go).
	appendJSON(b []byte, e *entry[P], rv string, created metav1.Time, s *itemScratch) []byte
	// appendProto writes the protobuf of one entry's item before p's content (itemproto.go).
	appendProto(p *protoBack, e *entry[P], rv string, created metav1.Time, s *itemScratch)
	// list builds the API list of entries, with resourceVersion rv.
	list(es []entry[P], rv string, created metav1.Time) runtime.Object
	// shared wraps a list built by list for sharing between requests (sharedNodeList, sharedPodList).
	shared(list runtime.Object) runtime.Object
	// empty is an object with only a key and a resourceVersion: bookmarks, and deletions known by key alone.
	empty(namespace, name, rv string) runtime.Object
	// rows is the Table form of an item or a list (shared or not); ok is false for any other type.
	rows(obj runtime.Object) (rows []metav1.TableRow, lm metav1.ListMeta, ok bool)
	// each calls f with every object of snap, servable or not.
	each(snap storage.Snapshot, f func(namespace, name string))
}
