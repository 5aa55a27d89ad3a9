package app

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestTrimKeepsWhatIsReadAndDropsTheRest(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}}}
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
		},
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"zone": "a"},
			Annotations: map[string]string{"metrics.k8s.io/resource-metrics-path": "/x"}},
		Status: corev1.NodeStatus{Addresses: node.Status.Addresses, DaemonEndpoints: node.Status.DaemonEndpoints},
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

	pod := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u2", ResourceVersion: "9", Labels: map[string]string{"app": "web"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1"}}, ManagedFields: managed}}
	wantPod := &metav1.PartialObjectMetadata{TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u2", ResourceVersion: "9", Labels: map[string]string{"app": "web"}}}
	if got, err := trimPod(pod); err != nil || !reflect.DeepEqual(got, wantPod) {
		t.Errorf("trimPod: %v\n got %+v\nwant %+v", err, got, wantPod)
	}

	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: wantPod}
	for _, f := range []cache.TransformFunc{trimNode, trimPod} {
		if got, err := f(tomb); err != nil || !reflect.DeepEqual(got, tomb) {
			t.Errorf("a tombstone is passed through unchanged: %v %+v", err, got)
		}
	}
}
