package api

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// nodeREST is the REST storage of metrics.k8s.io `nodes` (NodeMetrics, cluster-scoped).
type nodeREST = metricsREST[storage.NodePoint]

// newNodeStorage serves the nodes of lister that have metrics in m, with the server's readers r. nodeSelector
// (--node-selector) restricts the nodes served to those scraped, as metrics-server does; nil means all.
func newNodeStorage(m Snapshots, lister NodeLister, nodeSelector labels.Requirements, r readers) *nodeREST {
	return newMetricsREST[storage.NodePoint](m, nodeKind{nodes: lister, nodeSelector: nodeSelector}, r)
}

// nodeKind is the per-kind part of nodeREST.
type nodeKind struct {
	nodes        NodeLister
	nodeSelector labels.Requirements
}

func (nodeKind) info() kindInfo {
	return kindInfo{
		resource: nodeResource, kind: "NodeMetrics", singular: "nodemetrics",
		newItem: func() runtime.Object { return &metrics.NodeMetrics{} },
		newList: func() runtime.Object { return &metrics.NodeMetricsList{} },
	}
}

// essential is sel: nodes have no label index to tell which requirements every node meets.
func (nodeKind) essential(_ string, sel labels.Selector) (labels.Selector, bool) { return sel, false }

func (k nodeKind) objects(_ string, sel labels.Selector) ([]object, error) {
	if len(k.nodeSelector) > 0 {
		sel = sel.Add(k.nodeSelector...)
	}
	nodes, err := k.nodes.List(sel)
	if err != nil {
		klog.ErrorS(err, "Failed listing nodes", "labelSelector", sel.String())
		return nil, apierrors.NewInternalError(fmt.Errorf("listing nodes: %w", err))
	}
	objs := make([]object, len(nodes))
	for i, n := range nodes {
		objs[i] = object{name: n.Name, labels: n.Labels}
	}
	return objs, nil
}

func (k nodeKind) object(_, name string) (object, bool, error) {
	n, err := k.nodes.Get(name)
	if apierrors.IsNotFound(err) || (err == nil && n == nil) {
		return object{}, false, nil
	}
	if err != nil {
		klog.ErrorS(err, "Failed getting node", "node", klog.KRef("", name))
		return object{}, false, apierrors.NewInternalError(fmt.Errorf("getting node %q: %w", name, err))
	}
	return object{name: n.Name, labels: n.Labels}, true, nil
}

func (nodeKind) point(snap storage.Snapshot, o *object) (storage.NodePoint, bool) {
	return snap.Node(o.name)
}

func (nodeKind) same(a, b *storage.NodePoint) bool {
	return a.Timestamp.Equal(b.Timestamp) && a.Window == b.Window && a.Usage == b.Usage
}

func (nodeKind) item(e *entry[storage.NodePoint], rv string, created metav1.Time) runtime.Object {
	m := nodeMetrics(e, rv, created)
	return &m
}

func nodeMetrics(e *entry[storage.NodePoint], rv string, created metav1.Time) metrics.NodeMetrics {
	return metrics.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: e.name, Labels: e.labels, CreationTimestamp: created, ResourceVersion: rv},
		Timestamp:  metav1.NewTime(e.point.Timestamp),
		Window:     metav1.Duration{Duration: e.point.Window},
		Usage:      resourceList(e.point.Usage),
	}
}

func (nodeKind) list(es []entry[storage.NodePoint], rv string, created metav1.Time) runtime.Object {
	list := &metrics.NodeMetricsList{Items: make([]metrics.NodeMetrics, len(es))}
	list.ResourceVersion = rv
	for i := range es {
		list.Items[i] = nodeMetrics(&es[i], rv, created)
	}
	return list
}

func (nodeKind) shared(list runtime.Object) runtime.Object {
	return &sharedNodeList{NodeMetricsList: list.(*metrics.NodeMetricsList)}
}

func (nodeKind) empty(_, name, rv string) runtime.Object {
	return &metrics.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
}

func (nodeKind) rows(obj runtime.Object) ([]metav1.TableRow, metav1.ListMeta, bool) {
	if shared, ok := obj.(*sharedNodeList); ok {
		obj = shared.NodeMetricsList
	}
	switch t := obj.(type) {
	case *metrics.NodeMetrics:
		return []metav1.TableRow{nodeRow(t)}, metav1.ListMeta{ResourceVersion: t.ResourceVersion}, true
	case *metrics.NodeMetricsList:
		rows := make([]metav1.TableRow, len(t.Items))
		for i := range t.Items {
			rows[i] = nodeRow(&t.Items[i])
		}
		return rows, t.ListMeta, true
	}
	return nil, metav1.ListMeta{}, false
}

func nodeRow(m *metrics.NodeMetrics) metav1.TableRow {
	return metav1.TableRow{
		Cells: []any{m.Name, cpuCell(m.Usage[corev1.ResourceCPU]), memoryCell(m.Usage[corev1.ResourceMemory]),
			m.Window.Duration.String()},
		Object: runtime.RawExtension{Object: m},
	}
}

func (nodeKind) each(snap storage.Snapshot, f func(namespace, name string)) {
	snap.Each(func(name string) { f("", name) }, nil)
}

func (nodeKind) appendJSON(b []byte, e *entry[storage.NodePoint], rv string, created metav1.Time, s *itemScratch) []byte {
	return appendNodeJSON(b, e, rv, created, s)
}

func (nodeKind) appendProto(p *protoBack, e *entry[storage.NodePoint], rv string, created metav1.Time, s *itemScratch) {
	nodeProto(p, e, rv, created, s)
}
