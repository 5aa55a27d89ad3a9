package app

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/metrics-ring/metrics-ring/pkg/scraper"
)

// The informers keep every Node and Running pod for the life of the process, so their caches are most of the
// memory at scale: at 1,000 nodes x 30 pods, managedFields alone were a third of the heap. The transforms below keep
// only what the consumers read: names, labels (selectors, and copied into NodeMetrics/PodMetrics), and of a node
// its addresses, kubelet port and resource-metrics-path annotation (the scraper). Everything else (managedFields,
// other annotations, owner references, node images, conditions, capacity) is dropped before it is cached.

// trimNode is the node informer's transform.
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok { // a cache.DeletedFinalStateUnknown tombstone: its object was trimmed when it was cached
		return obj, nil
	}
	var annotations map[string]string
	if p, ok := n.Annotations[scraper.AnnotationResourceMetricsPath]; ok {
		annotations = map[string]string{scraper.AnnotationResourceMetricsPath: p}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
			Labels: n.Labels, Annotations: annotations},
		Status: corev1.NodeStatus{Addresses: n.Status.Addresses, DaemonEndpoints: n.Status.DaemonEndpoints},
	}, nil
}

// trimPod is the pod metadata informer's transform.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: p.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: p.Name,
		Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, Labels: p.Labels}}, nil
}

var (
	_ cache.TransformFunc = trimNode
	_ cache.TransformFunc = trimPod
)
