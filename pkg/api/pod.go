package api

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// podREST is the REST storage of metrics.k8s.io `pods` (PodMetrics, namespaced).
type podREST = metricsREST[storage.PodPoint]

// newPodStorage serves the Running pods of lister that have metrics in m, with the server's readers r.
func newPodStorage(m Snapshots, lister PodLister, r readers) *podREST {
	return newMetricsREST[storage.PodPoint](m, podKind{pods: lister}, r)
}

// podKind is the per-kind part of podREST.
type podKind struct{ pods PodLister }

func (podKind) info() kindInfo {
	return kindInfo{
		resource: podResource, kind: "PodMetrics", singular: "podmetrics", namespaced: true,
		newItem: func() runtime.Object { return &metrics.PodMetrics{} },
		newList: func() runtime.Object { return &metrics.PodMetricsList{} },
	}
}

// podSelector is a PodLister that narrows a namespace's selection by label (PodIndex).
type podSelector interface {
	selectIn(namespace string, sel labels.Selector) (objs []any, ok bool, err error)
	upTo(namespace string, sel labels.Selector) (n int, known bool)
	essential(namespace string, sel labels.Selector) (labels.Selector, bool)
}

// essential is sel without the requirements the label index knows no pod of namespace fails, or sel itself.
func (k podKind) essential(namespace string, sel labels.Selector) (labels.Selector, bool) {
	if ix, ok := k.pods.(podSelector); ok {
		return ix.essential(namespace, sel)
	}
	return sel, false
}

func (k podKind) objects(namespace string, sel labels.Selector) ([]object, error) {
	var out []object
	add := func(obj any) {
		pod, err := meta.Accessor(obj)
		if err != nil {
			klog.ErrorS(err, "Skipping pod lister object without metadata", "type", fmt.Sprintf("%T", obj))
			return
		}
		out = append(out, podObject(obj, pod))
	}
	if err := k.read(namespace, sel, func(n int) { out = slices.Grow(out, n) }, add); err != nil {
		klog.ErrorS(err, "Failed listing pods", "namespace", namespace, "labelSelector", sel.String())
		return nil, apierrors.NewInternalError(fmt.Errorf("listing pods: %w", err))
	}
	return out, nil
}

// read calls add with each pod of namespace ("" for all) that sel selects, after telling grow how many: read from
// the label index when it narrows sel, else by walking the namespace (or every pod).
func (k podKind) read(namespace string, sel labels.Selector, grow func(n int), add func(obj any)) error {
	if ix, ok := k.pods.(podSelector); ok {
		if objs, ok, err := ix.selectIn(namespace, sel); ok {
			grow(len(objs))
			for _, obj := range objs {
				add(obj)
			}
			return err
		}
	}
	var objs []runtime.Object
	var err error
	if namespace == metav1.NamespaceAll {
		objs, err = k.pods.List(sel)
	} else {
		objs, err = k.pods.ByNamespace(namespace).List(sel)
	}
	grow(len(objs))
	for _, obj := range objs {
		add(obj)
	}
	return err
}

// upTo is at most how many pods sel selects in namespace, when the lister knows it before listing.
func (k podKind) upTo(namespace string, sel labels.Selector) (int, bool) {
	if ix, ok := k.pods.(podSelector); ok {
		return ix.upTo(namespace, sel)
	}
	return 0, false
}

func (k podKind) object(namespace, name string) (object, bool, error) {
	obj, err := k.pods.ByNamespace(namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && obj == nil) {
		return object{}, false, nil
	}
	if err != nil {
		klog.ErrorS(err, "Failed getting pod", "pod", klog.KRef(namespace, name))
		return object{}, false, apierrors.NewInternalError(fmt.Errorf("getting pod %s/%s: %w", namespace, name, err))
	}
	pod, err := meta.Accessor(obj)
	if err != nil {
		return object{}, false, apierrors.NewInternalError(fmt.Errorf("pod %s/%s: %w", namespace, name, err))
	}
	return podObject(obj, pod), true, nil
}

// IdentifiedPod is a pod lister's object that tells which object it is: the number storage was given for it
// (storage.PodObject.UID; cmd's trimmed pods), so that a point is joined only with the object it was measured for.
type IdentifiedPod interface{ ObjectUID() uint64 }

// podObject is the object of the pod lister's obj, whose metadata is m.
func podObject(obj any, m metav1.Object) object {
	o := object{namespace: m.GetNamespace(), name: m.GetName(), labels: m.GetLabels()}
	if id, ok := obj.(IdentifiedPod); ok {
		o.uid = id.ObjectUID()
	}
	return o
}

func (podKind) point(snap storage.Snapshot, o *object) (storage.PodPoint, bool) {
	p, ok := snap.Pod(o.namespace, o.name)
	if ok && o.uid != 0 && p.UID != 0 && p.UID != o.uid {
		// Measured for its predecessor under the name: deleted and re-created, the new object reaches the
		// informer before storage publishes the old one's removal (DESIGN.md section 2, "Whose samples count").
		return storage.PodPoint{}, false
	}
	return p, ok
}

func (podKind) same(a, b *storage.PodPoint) bool {
	return a.Timestamp.Equal(b.Timestamp) && a.Window == b.Window && slices.Equal(a.Usages, b.Usages) &&
		slices.Equal(a.Names, b.Names)
}

func (podKind) item(e *entry[storage.PodPoint], rv string, created metav1.Time) runtime.Object {
	m := podMetrics(e, rv, created)
	return &m
}

func podMetrics(e *entry[storage.PodPoint], rv string, created metav1.Time) metrics.PodMetrics {
	containers := make([]metrics.ContainerMetrics, len(e.point.Names))
	for i, name := range e.point.Names {
		containers[i] = metrics.ContainerMetrics{Name: name, Usage: resourceList(e.point.Usages[i])}
	}
	return metrics.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{
			Name: e.name, Namespace: e.namespace, Labels: e.labels, CreationTimestamp: created, ResourceVersion: rv,
		},
		Timestamp:  metav1.NewTime(e.point.Timestamp),
		Window:     metav1.Duration{Duration: e.point.Window},
		Containers: containers,
	}
}

func (podKind) list(es []entry[storage.PodPoint], rv string, created metav1.Time) runtime.Object {
	list := &metrics.PodMetricsList{Items: make([]metrics.PodMetrics, len(es))}
	list.ResourceVersion = rv
	for i := range es {
		list.Items[i] = podMetrics(&es[i], rv, created)
	}
	return list
}

func (podKind) shared(list runtime.Object) runtime.Object {
	return &sharedPodList{PodMetricsList: list.(*metrics.PodMetricsList)}
}

func (podKind) empty(namespace, name, rv string) runtime.Object {
	return &metrics.PodMetrics{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: rv}}
}

// rows sums a pod's usage over its containers.
func (podKind) rows(obj runtime.Object) ([]metav1.TableRow, metav1.ListMeta, bool) {
	if shared, ok := obj.(*sharedPodList); ok {
		obj = shared.PodMetricsList
	}
	switch t := obj.(type) {
	case *metrics.PodMetrics:
		return []metav1.TableRow{podRow(t)}, metav1.ListMeta{ResourceVersion: t.ResourceVersion}, true
	case *metrics.PodMetricsList:
		rows := make([]metav1.TableRow, len(t.Items))
		for i := range t.Items {
			rows[i] = podRow(&t.Items[i])
		}
		return rows, t.ListMeta, true
	}
	return nil, metav1.ListMeta{}, false
}

func podRow(m *metrics.PodMetrics) metav1.TableRow {
	var cpu, mem resource.Quantity
	for _, c := range m.Containers {
		cpu.Add(c.Usage[corev1.ResourceCPU])
		mem.Add(c.Usage[corev1.ResourceMemory])
	}
	return metav1.TableRow{
		Cells:  []any{m.Name, cpuCell(cpu), memoryCell(mem), m.Window.Duration.String()},
		Object: runtime.RawExtension{Object: m},
	}
}

func (podKind) each(snap storage.Snapshot, f func(namespace, name string)) { snap.Each(nil, f) }

func (podKind) appendJSON(b []byte, e *entry[storage.PodPoint], rv string, created metav1.Time, s *itemScratch) []byte {
	return appendPodJSON(b, e, rv, created, s)
}

func (podKind) appendProto(p *protoBack, e *entry[storage.PodPoint], rv string, created metav1.Time, s *itemScratch) {
	podProto(p, e, rv, created, s)
}
