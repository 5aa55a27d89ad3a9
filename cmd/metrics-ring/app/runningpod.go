package app

import (
	"hash/maphash"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metrics-ring/metrics-ring/pkg/api"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// runningPod is what the pod informer caches of a Running pod (trimmed as it arrives, see trim.go): what is read of it
// and nothing else. The API reads its namespace, name and labels through meta.Accessor, storage the node it is bound
// to, which decides whose samples count (DESIGN.md section 2), and the informer its key and resourceVersion. A whole
// corev1.Pod, even emptied, or a PartialObjectMetadata with the node name, is several times its size (BENCHMARKS.md,
// "Figures behind the comments"). It is a metav1.Object itself, so that meta.Accessor and the informer's key and index
// functions read it without a copy.
type runningPod struct {
	unkeptMeta
	namespace, name, resourceVersion string
	nodeName                         string
	labels                           map[string]string
	// uid is a hash of metadata.uid, and created when the object began in Unix seconds (began; 0 for a static
	// pod's mirror, which is younger than its containers): storage takes a pod's samples only for this object
	// (DESIGN.md section 2, "Whose samples count"). 16 bytes, where the UID's string would cost 52.
	uid     uint64
	created int64
}

// uidSeed seeds the UIDs' hashes: they are compared within this process only.
var uidSeed = maphash.MakeSeed()

// hashUID returns a pod UID's hash, 0 for none. Two UIDs of one pod name colliding in 64 bits is out of reach.
func hashUID(uid types.UID) uint64 {
	if uid == "" {
		return 0
	}
	return maphash.String(uidSeed, string(uid)) | 1 // never 0, which means unknown
}

// ObjectUID tells the API which object the pod is: the number storage knows it by (its points' UID).
func (p *runningPod) ObjectUID() uint64 { return p.uid }

// object is the pod as storage knows it.
func (p *runningPod) object() storage.PodObject {
	o := storage.PodObject{Namespace: p.namespace, Name: p.name, Node: p.nodeName, UID: p.uid}
	if p.created != 0 {
		o.Created = time.Unix(p.created, 0)
	}
	return o
}

// DeepCopyObject implements runtime.Object.
func (p *runningPod) DeepCopyObject() runtime.Object {
	c := *p
	c.labels = maps.Clone(p.labels)
	return &c
}

// GetObjectKind implements runtime.Object: a cached pod carries no type information.
func (p *runningPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (p *runningPod) GetNamespace() string               { return p.namespace }
func (p *runningPod) SetNamespace(namespace string)      { p.namespace = namespace }
func (p *runningPod) GetName() string                    { return p.name }
func (p *runningPod) SetName(name string)                { p.name = name }
func (p *runningPod) GetResourceVersion() string         { return p.resourceVersion }
func (p *runningPod) SetResourceVersion(version string)  { p.resourceVersion = version }
func (p *runningPod) GetLabels() map[string]string       { return p.labels }
func (p *runningPod) SetLabels(labels map[string]string) { p.labels = labels }

// unkeptMeta is the part of metav1.Object that runningPod does not keep: its getters return the zero value and its
// setters drop what they are given. Nothing sets them: the informer's cached objects are read-only.
type unkeptMeta struct{}

func (unkeptMeta) GetGenerateName() string                       { return "" }
func (unkeptMeta) SetGenerateName(string)                        {}
func (unkeptMeta) GetUID() types.UID                             { return "" }
func (unkeptMeta) SetUID(types.UID)                              {}
func (unkeptMeta) GetGeneration() int64                          { return 0 }
func (unkeptMeta) SetGeneration(int64)                           {}
func (unkeptMeta) GetSelfLink() string                           { return "" }
func (unkeptMeta) SetSelfLink(string)                            {}
func (unkeptMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (unkeptMeta) SetCreationTimestamp(metav1.Time)              {}
func (unkeptMeta) GetDeletionTimestamp() *metav1.Time            { return nil }
func (unkeptMeta) SetDeletionTimestamp(*metav1.Time)             {}
func (unkeptMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (unkeptMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (unkeptMeta) GetAnnotations() map[string]string             { return nil }
func (unkeptMeta) SetAnnotations(map[string]string)              {}
func (unkeptMeta) GetFinalizers() []string                       { return nil }
func (unkeptMeta) SetFinalizers([]string)                        {}
func (unkeptMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (unkeptMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (unkeptMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (unkeptMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

var (
	_ runtime.Object = (*runningPod)(nil)
	_ metav1.Object  = (*runningPod)(nil)
	// The API joins a pod's point only with the object it was measured for.
	_ api.IdentifiedPod = (*runningPod)(nil)
)
