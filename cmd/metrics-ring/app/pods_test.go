package app

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/metrics-ring/metrics-ring/pkg/api"
)

// TestRunningPodsIndexedByLabel: the pod informer as Wire builds it indexes its trimmed pods by namespace and label,
// and a relabeled pod moves between the index's sets.
func TestRunningPodsIndexedByLabel(t *testing.T) {
	pod := func(name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	client := fake.NewClientset(pod("p1", "web"), pod("p2", "web"), pod("p3", "db"))
	factory, informer, _, err := runningPods(client)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the pod informer never synced")
	}
	names := func(value string) []string {
		objs, err := informer.GetIndexer().ByIndex(api.PodLabelIndex, value)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.(*runningPod).name)
		}
		slices.Sort(out)
		return out
	}
	if got := names("ns/app=web"); !slices.Equal(got, []string{"p1", "p2"}) {
		t.Errorf("ns/app=web: %v, want [p1 p2]", got)
	}
	if _, err := client.CoreV1().Pods("ns").Update(ctx, pod("p2", "db"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200 && len(names("ns/app=db")) != 2; i++ { // bounded: the informer's watch delivers it
		time.Sleep(10 * time.Millisecond)
	}
	if got := names("ns/app=db"); !slices.Equal(got, []string{"p2", "p3"}) {
		t.Errorf("ns/app=db after p2 was relabeled: %v, want [p2 p3]", got)
	}
}
