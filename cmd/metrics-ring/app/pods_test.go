package app

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/metrics-ring/metrics-ring/pkg/api"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestRunningPodsIndexedByLabel: the pod informer as Wire builds it indexes its trimmed pods by label, and a
// relabeled pod moves between the index's sets; the API lists a namespace's pods from the index's own lists, the
// informer having no namespace index, and a deleted pod leaves them.
func TestRunningPodsIndexedByLabel(t *testing.T) {
	pod := func(name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	client := fake.NewClientset(pod("p1", "web"), pod("p2", "web"), pod("p3", "db"))
	factory, informer, index, err := runningPods(client, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := informer.GetIndexer().GetIndexers()[cache.NamespaceIndex]; ok {
		t.Error("the pod informer keeps a namespace index: its sets of pod keys grow as pods turn over")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced, index.HasSynced) {
		t.Fatal("the pod informer never synced")
	}
	names := func(value string) []string {
		objs, err := informer.GetIndexer().ByIndex(api.PodLabelIndex, value)
		return podNames(t, objs, err)
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
	listed := func() []string {
		objs, err := index.ByNamespace("ns").List(labels.Everything())
		return podNames(t, objs, err)
	}
	if got := listed(); !slices.Equal(got, []string{"p1", "p2", "p3"}) {
		t.Errorf("namespace ns lists %v, want [p1 p2 p3]", got)
	}
	if err := client.CoreV1().Pods("ns").Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200 && len(listed()) != 2; i++ { // bounded: the informer's watch delivers it
		time.Sleep(10 * time.Millisecond)
	}
	if got := listed(); !slices.Equal(got, []string{"p2", "p3"}) {
		t.Errorf("namespace ns after p1 was deleted lists %v, want [p2 p3]", got)
	}
}

// podNames returns the sorted names of the trimmed pods objs.
func podNames[O any](t *testing.T, objs []O, err error) []string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, any(o).(*runningPod).name)
	}
	slices.Sort(out)
	return out
}

// TestPodDeletedByTombstoneKey (a review's finding): a relist's tombstone holds no object when the informer's store
// could not say what it held; the pod's series are dropped by the tombstone's key (before, they were kept, with an
// error logged, until they went stale).
func TestPodDeletedByTombstoneKey(t *testing.T) {
	for _, obj := range []any{
		cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: nil},
		cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: &runningPod{namespace: "ns", name: "p"}},
		&runningPod{namespace: "ns", name: "p"},
	} {
		store := servedPods(t, "p", "q")
		podDeleted(store, obj)
		podDeleted(store, &runningPod{namespace: "ns", name: "q"})
		if removed, _, _ := store.RemovedAfter(0); len(removed) != 2 || removed[0].Name != "p" {
			t.Errorf("deleted by %#v: storage removed %v, want p then q", obj, removed)
		}
	}
}

// servedPods is a storage that serves pods of namespace ns, each one container on node n1, from two scrapes.
func servedPods(t *testing.T, names ...string) *storage.Storage {
	t.Helper()
	store := storage.New(storage.Options{})
	start, now := time.Now().Add(-time.Hour), time.Now()
	for _, name := range names {
		store.PodBound("ns", name, "n1")
	}
	for i, ts := range []time.Time{now.Add(-15 * time.Second), now} {
		b := &storage.Batch{Key: "n1", CPU: storage.CPUCumulative, Nodes: []storage.NodeSample{{Node: "n1",
			Sample: storage.Sample{Timestamp: ts, StartTime: start, CPU: float64(10 + 10*i), Memory: 1 << 30}}}}
		for _, name := range names {
			b.Containers = append(b.Containers, storage.ContainerSample{Namespace: "ns", Pod: name, Container: "app",
				Sample: storage.Sample{Timestamp: ts, StartTime: start, CPU: float64(1 + i), Memory: 1 << 20}})
		}
		cy := store.BeginCycle()
		if rej := cy.Append(b); rej != (storage.Rejection{}) {
			t.Fatalf("rejected %+v", rej)
		}
		cy.Commit(storage.Outcome{Success: true})
	}
	for _, name := range names {
		if _, ok := store.Latest().Pod("ns", name); !ok {
			t.Fatalf("pod ns/%s not served", name)
		}
	}
	return store
}
