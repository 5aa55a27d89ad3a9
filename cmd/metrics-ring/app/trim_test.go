package app

import (
	"fmt"
	"maps"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestTrimKeepsWhatIsReadAndDropsTheRest(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)}}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"zone": "a"},
			Annotations:   map[string]string{"metrics.k8s.io/resource-metrics-path": "/x", "node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: managed},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			Images:          []corev1.ContainerImage{{Names: []string{"big"}, SizeBytes: 1 << 30}},
			Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("19"),
				corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"zone": "a"},
			Annotations: map[string]string{"metrics.k8s.io/resource-metrics-path": "/x"}},
		Status: corev1.NodeStatus{Addresses: node.Status.Addresses, DaemonEndpoints: node.Status.DaemonEndpoints,
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("19"),
				corev1.ResourceMemory: resource.MustParse("64Gi")}},
	}
	got, err := trimNode(node)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("trimNode: %v\n got %+v\nwant %+v", err, got, want)
	}
	if again, _ := trimNode(got); !reflect.DeepEqual(again, want) {
		t.Errorf("trimNode is not idempotent: %+v", again)
	}
	if bare, _ := trimNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", Annotations: map[string]string{"a": "b"}}}); bare.(*corev1.Node).Annotations != nil {
		t.Errorf("a node without the path annotation kept annotations: %+v", bare)
	}

	started := metav1.Unix(1795262403, 0)
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u2", ResourceVersion: "9", Labels: map[string]string{"app": "web"},
			CreationTimestamp: metav1.Unix(1795262400, 0),
			Annotations:       map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1"}}, ManagedFields: managed},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app", Image: "web:1",
			Env: []corev1.EnvVar{{Name: "BIG", Value: "..."}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", StartTime: &started,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true}}}}
	wantPod := &runningPod{name: "p", namespace: "ns", resourceVersion: "9", labels: map[string]string{"app": "web"},
		nodeName: "n1", uid: hashUID("u2"), created: 1795262403} // the kubelet's start time, on the samples' clock
	trimPod := (&podTrimmer{}).trim
	if got, err := trimPod(pod); err != nil || !reflect.DeepEqual(got, wantPod) {
		t.Errorf("trimPod: %v\n got %+v\nwant %+v", err, got, wantPod)
	}
	// A static pod's mirror is younger than its containers: no creation time bounds its samples.
	mirror := pod.DeepCopy()
	mirror.Annotations[corev1.MirrorPodAnnotationKey] = "x"
	if got, _ := trimPod(mirror); got.(*runningPod).created != 0 {
		t.Errorf("a mirror pod keeps its creation time: %+v", got)
	}
	noStart := pod.DeepCopy()
	noStart.Status.StartTime = nil
	if got, _ := trimPod(noStart); got.(*runningPod).created != 1795262400 {
		t.Errorf("a pod without a start time does not begin at its creation: %+v", got)
	}
	if hashUID("u2") == hashUID("u3") || hashUID("") != 0 {
		t.Errorf("UIDs hash to %d, %d and %d", hashUID("u2"), hashUID("u3"), hashUID(""))
	}

	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: wantPod}
	for _, f := range []cache.TransformFunc{trimNode, trimPod} {
		if got, err := f(tomb); err != nil || !reflect.DeepEqual(got, tomb) {
			t.Errorf("a tombstone is passed through unchanged: %v %+v", err, got)
		}
	}
}

// TestPodsShareEqualLabels checks that pods with equal labels share one map (a workload's replicas), that pods
// with other labels do not get them, and that forgetting the sets at the bound loses no pod's labels.
func TestPodsShareEqualLabels(t *testing.T) {
	trimmer := &podTrimmer{}
	pod := func(name string, labels map[string]string) map[string]string {
		t.Helper()
		got, err := trimmer.trim(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: labels}, Spec: corev1.PodSpec{NodeName: "n1"}})
		if err != nil {
			t.Fatal(err)
		}
		lbls := got.(*runningPod).labels
		if !maps.Equal(lbls, labels) {
			t.Fatalf("pod %s: labels %v, want %v", name, lbls, labels)
		}
		return lbls
	}
	web1 := pod("web-1", map[string]string{"app": "web", "pod-template-hash": "5d4f"})
	web2 := pod("web-2", map[string]string{"pod-template-hash": "5d4f", "app": "web"})
	if reflect.ValueOf(web1).UnsafePointer() != reflect.ValueOf(web2).UnsafePointer() {
		t.Error("two replicas with equal labels hold two maps")
	}
	other := pod("api-1", map[string]string{"app": "api", "pod-template-hash": "5d4f"})
	if reflect.ValueOf(other).UnsafePointer() == reflect.ValueOf(web1).UnsafePointer() {
		t.Error("a pod with other labels was given the replicas' map")
	}
	if none := pod("bare", nil); none != nil {
		t.Errorf("a pod without labels got %v", none)
	}
	for i := range maxLabelSets + 10 { // a StatefulSet's pods: labels of their own
		pod(fmt.Sprintf("db-%d", i), map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": fmt.Sprintf("db-%d", i)})
	}
	if len(trimmer.sets) > maxLabelSets {
		t.Errorf("%d label sets kept, more than the bound %d", len(trimmer.sets), maxLabelSets)
	}
	pod("web-3", map[string]string{"app": "web", "pod-template-hash": "5d4f"})
}
