package app

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/metrics-ring/metrics-ring/pkg/scraper"
)

// The informers keep every Node and Running pod for the life of the process, so their caches are most of the memory at
// scale, managedFields the largest part (BENCHMARKS.md, "Figures behind the comments"). The transforms below keep only
// what the consumers read: names, labels (selectors, and copied into NodeMetrics/PodMetrics), and of a node its
// addresses, kubelet port and resource-metrics-path annotation (the scraper) and CPU and memory capacity (storage).
// Everything else (managedFields, other annotations, owner references, node images, conditions, capacity beyond CPU and
// memory) is dropped before it is cached.

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
	var capacity corev1.ResourceList // what storage bounds served values by (DESIGN.md section 2, "Plausibility")
	for _, r := range [...]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := n.Status.Capacity[r]; ok {
			if capacity == nil {
				capacity = make(corev1.ResourceList, 2)
			}
			capacity[r] = q
		}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
			Labels: n.Labels, Annotations: annotations},
		Status: corev1.NodeStatus{Addresses: n.Status.Addresses, DaemonEndpoints: n.Status.DaemonEndpoints,
			Capacity: capacity},
	}, nil
}

// podTrimmer is the pod informer's transform: a Pod becomes a runningPod. Beyond trimming, it interns label maps and
// node names: the replicas of a workload carry equal labels, and each pod's own copy of a small map costs heap a pod
// (BENCHMARKS.md, "Figures behind the comments"); a node's pods all name it. Maps and strings in the informer's cache
// are read-only, so pods can share them.
type podTrimmer struct {
	mu    sync.Mutex
	sets  map[string]map[string]string // by labels in canonical form
	key   []byte
	nodes map[string]string
}

// maxLabelSets bounds the interned sets: when there are this many (workloads came and went, or every pod has
// labels of its own, as a StatefulSet's do), they are forgotten and sharing starts afresh. Pods keep the maps they
// were given either way.
const maxLabelSets = 16384

func (t *podTrimmer) trim(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok { // a cache.DeletedFinalStateUnknown tombstone: its object was trimmed when it was cached
		return obj, nil
	}
	rp := &runningPod{namespace: p.Namespace, name: p.Name, resourceVersion: p.ResourceVersion,
		labels: t.intern(p.Labels), nodeName: t.node(p.Spec.NodeName), uid: hashUID(p.UID)}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; !mirror {
		// A static pod's containers run before its mirror object is created, and go on when the kubelet re-creates
		// it: the same pod, so nothing bounds its samples.
		rp.created = began(p)
	}
	return rp, nil
}

// began is when a pod object began, in Unix seconds (0 unknown): its status.startTime, when its kubelet first
// handled it, on the kubelet's clock like the samples storage compares it with (no skew between the API server's
// clock and the node's), else its creationTimestamp. Both come after its predecessor under the name was deleted.
func began(p *corev1.Pod) int64 {
	switch {
	case p.Status.StartTime != nil && !p.Status.StartTime.IsZero():
		return p.Status.StartTime.Unix()
	case !p.CreationTimestamp.IsZero():
		return p.CreationTimestamp.Unix()
	}
	return 0
}

// node returns the shared copy of a node name.
func (t *podTrimmer) node(name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if shared, ok := t.nodes[name]; ok {
		return shared
	}
	if t.nodes == nil || len(t.nodes) >= maxLabelSets { // nodes came and went: start sharing afresh
		t.nodes = make(map[string]string)
	}
	t.nodes[name] = name
	return name
}

// intern returns the shared map equal to labels, making labels that map when there is none.
func (t *podTrimmer) intern(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return labels
	}
	names := slices.Sorted(maps.Keys(labels))
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.key[:0]
	for _, name := range names { // label names and values cannot hold a NUL
		k = append(append(append(append(k, name...), 0), labels[name]...), 0)
	}
	t.key = k
	if shared, ok := t.sets[string(k)]; ok {
		return shared
	}
	if t.sets == nil || len(t.sets) >= maxLabelSets {
		t.sets = make(map[string]map[string]string)
	}
	t.sets[string(k)] = labels
	return labels
}

var (
	_ cache.TransformFunc = trimNode
	_ cache.TransformFunc = (*podTrimmer)(nil).trim
)
