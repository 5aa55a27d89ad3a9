package app

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/api"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// runningPods is the informer of Running pods, and of them only metadata and spec.nodeName (trimmed as they arrive,
// into runningPod): a large cluster's pod specs would dominate memory. The node name says whose samples count. The
// API lists them through their label index and its own lists of each namespace's pods, so the informer has no
// namespace index (the one a factory's informer has): its hash sets of pod keys grow once as pods turn over. bindings
// hears of each pod after the API's index has (api.NewPodIndex).
func runningPods(client kubernetes.Interface, bindings cache.ResourceEventHandler) (informers.SharedInformerFactory, cache.SharedIndexInformer, *api.PodIndex, error) {
	running := func(lo *metav1.ListOptions) { lo.FieldSelector = "status.phase=Running" }
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.InformerFor(&corev1.Pod{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(c, metav1.NamespaceAll, resync, cache.Indexers{}, running)
	})
	if err := informer.SetTransform((&podTrimmer{}).trim); err != nil {
		return nil, nil, nil, fmt.Errorf("pod informer: %w", err)
	}
	index, err := api.NewPodIndex(informer, bindings)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pod informer: %w", err)
	}
	return factory, informer, index, nil
}

// podBindings feeds storage the pod informer's events: which pods are Running, on which node, and which are gone.
func podBindings(store *storage.Storage) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*runningPod); ok {
				store.BindPod(p.object())
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, _ := oldObj.(*runningPod)
			p, ok := newObj.(*runningPod)
			// spec.nodeName is immutable once set, and so is a UID: a change is another object under the name,
			// delivered as an update when the informer missed the deletion (a relist). status.startTime is set
			// once, before the pod runs.
			if ok && (old == nil || old.nodeName != p.nodeName || old.uid != p.uid || old.created != p.created) {
				store.BindPod(p.object())
			}
		},
		DeleteFunc: func(obj any) { podDeleted(store, obj) },
	}
}

// podDeleted drops a deleted (or no longer Running) pod's series from storage: the pod informer's delete handler.
func podDeleted(store *storage.Storage, obj any) {
	namespace, name, ok := api.DeletedPod(obj)
	if !ok {
		klog.ErrorS(nil, "Pod informer delivered a deletion of an unexpected type", "type", fmt.Sprintf("%T", obj))
		return
	}
	store.PodDeleted(namespace, name)
}

// nodeDeleted drops a deleted node's series from storage: the node informer's delete handler.
func nodeDeleted(store *storage.Storage, obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		store.NodeDeleted(n.Name)
		return
	}
	klog.ErrorS(nil, "Node informer delivered a deletion of an unexpected type", "type", fmt.Sprintf("%T", obj))
}

// nodeCapacities feeds storage each node's capacity from the node informer's events: no value above it is served.
func nodeCapacities(store *storage.Storage) cache.ResourceEventHandler {
	capacity := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			store.NodeCapacity(n.Name, storage.Capacity{
				CPU:    n.Status.Capacity.Cpu().AsApproximateFloat64(),
				Memory: n.Status.Capacity.Memory().AsApproximateFloat64(),
			})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    capacity,
		UpdateFunc: func(_, obj any) { capacity(obj) },
		DeleteFunc: func(obj any) { nodeDeleted(store, obj) },
	}
}
