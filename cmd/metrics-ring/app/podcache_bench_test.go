package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// turnoverPods is the soak's cluster (1,000 nodes x 30 pods, 10 namespaces, three apps, workloads of 15 pods).
const turnoverPods = 30000

// podFeed is the pod informer Wire builds (runningPods: the trimmer, the label index, PodIndex's counts and
// namespace lists) fed by a watch of its own: no API server, and no fake clientset's tracker, whose maps would churn
// with the informer's. Storage's bindings are left out: without collection cycles, what storage keeps of pods
// replaced waits for a commit (its own benchmarks churn it with cycles).
type podFeed struct {
	watcher *watch.FakeWatcher
	handled atomic.Int64 // events the informer has handled
	sent    int64
	rv      int
	seq     int
	names   []string // the pod of each place, by index
}

func newPodFeed(b *testing.B) *podFeed {
	f := &podFeed{watcher: watch.NewFakeWithChanSize(1024, false), names: make([]string, turnoverPods)}
	// The first pods come as the server's do, by a list: the informer's store is then made at its size.
	list := &corev1.PodList{}
	for i := range turnoverPods {
		list.Items = append(list.Items, *f.pod(i, f.name(i)))
	}
	list.ResourceVersion = fmt.Sprint(f.rv)
	client := fake.NewClientset()
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		listed := list
		list = &corev1.PodList{} // a relist of a benchmark's watch would be a bug: it finds the store empty
		return true, listed, nil
	})
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) { return true, f.watcher, nil })
	factory, informer, _, err := runningPods(client, nil)
	if err != nil {
		b.Fatal(err)
	}
	count := func(any) { f.handled.Add(1) } // the store is updated before any handler is called
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: count, DeleteFunc: count}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		b.Fatal("the pod informer never synced")
	}
	f.sent = turnoverPods
	f.wait(b)
	return f
}

// pod is the pod at place i under name, labelled as the simulator labels pod i.
func (f *podFeed) pod(i int, name string) *corev1.Pod {
	f.rv++
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("sim-ns-%d", i%10), Name: name,
			UID: types.UID(fmt.Sprintf("00000000-0000-4000-a000-%012d", f.seq)), ResourceVersion: fmt.Sprint(f.rv),
			Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%3), "workload": fmt.Sprintf("w-%d", i/10/15)}},
		Spec:   corev1.PodSpec{NodeName: fmt.Sprintf("sim-node-%d", i%1000)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// name gives place i a name never used before, as churn's successors have.
func (f *podFeed) name(i int) string {
	f.seq++
	f.names[i] = fmt.Sprintf("sim-pod-r%d", f.seq)
	return f.names[i]
}

// add creates a pod at place i.
func (f *podFeed) add(i int) {
	f.watcher.Add(f.pod(i, f.name(i)))
	f.sent++
}

// replace deletes the pod at place i and creates its successor.
func (f *podFeed) replace(i int) {
	f.watcher.Delete(f.pod(i, f.names[i]))
	f.sent++
	f.add(i)
}

// wait returns when the informer has handled every event sent.
func (f *podFeed) wait(b *testing.B) {
	for deadline := time.Now().Add(time.Minute); f.handled.Load() != f.sent; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) || f.handled.Load() > f.sent { // more: a relist delivered what was not sent
			b.Fatalf("the informer handled %d of %d events in a minute", f.handled.Load(), f.sent)
		}
	}
}

// liveHeap is the heap left after two collections, in bytes.
func liveHeap() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

// BenchmarkPodInformerTurnover makes 30,000 replacements of the pod informer's 30,000 pods an iteration (each at a
// random place, under a new name, as the soak's churn does: some places twice, some not at all) and reports what
// the cache holds afterwards beyond what it held with its first pods, per pod: -benchtime=1x, 2x, 3x ... give the
// growth after that many turnovers. The number of pods never changes, so what grows is kept room: Go's maps (the
// informer's store and its label index; its namespace index, before PodIndex listed namespaces itself) grow when
// deletions leave them full of tombstones (golang/go#70886), and stop once they have room for the churn. ns/op is
// the wall time of an iteration's 60,000 events, made and handled; -benchtime=Nx sets the turnovers.
func BenchmarkPodInformerTurnover(b *testing.B) {
	f := newPodFeed(b)
	before := liveHeap()
	order := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		for i := range turnoverPods {
			f.replace(order.IntN(turnoverPods))
			if i%256 == 255 { // paced: no queue of the informer's grows with a burst the soak never sends
				f.wait(b)
			}
		}
		f.wait(b)
	}
	b.ReportMetric(before/turnoverPods, "B/pod-at-start")
	b.ReportMetric((liveHeap()-before)/turnoverPods, "B/pod-grown")
}
