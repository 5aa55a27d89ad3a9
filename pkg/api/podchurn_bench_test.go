package api

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkPodIndexTurnover replaces the pods of hpaCluster (30,000 in 10 namespaces of 3,000) four times over
// through a pod informer with the label index, as a soak's churn does: a pod deleted at random, a successor of its
// workload under a new name. held-B/pod is the heap after a collection at the start, per pod (the informer's store
// and indexes, and PodIndex, without the objects); settle-B/pod how much it grew over the first two turnovers, and
// growth-B/pod over the next two: a hash map keyed by pod name whose tables fill with deleted slots grows once as
// the names turn over (Go's maps never shrink), a leak would go on growing. "deployments" labels the pods as
// hpaCluster does, "tier" of every pod of a namespace alike; "one-label" with their workload's label alone, as the
// soak does.
func BenchmarkPodIndexTurnover(b *testing.B) {
	for _, name := range []string{"deployments", "one-label"} {
		var pods []*metav1.PartialObjectMetadata
		hpaCluster(func(ns, pod string, l map[string]string) {
			if name == "one-label" {
				l = map[string]string{"app": l["app"]}
			}
			pods = append(pods, podMeta(ns, pod, l))
		})
		b.Run(name, func(b *testing.B) { podIndexTurnover(b, pods) })
	}
}

func podIndexTurnover(b *testing.B, pods []*metav1.PartialObjectMetadata) {
	rng := rand.New(rand.NewPCG(1, 2))
	var start, settled, grown int64
	for b.Loop() {
		b.StopTimer()
		live := append([]*metav1.PartialObjectMetadata(nil), pods...)
		// The successors are made before the heap is read, so that it counts the structures, not the objects.
		// A pod's successors keep its namespace and labels (its workload's), so each namespace keeps its size.
		slot := make([]int, 4*len(live))
		next := make([]*metav1.PartialObjectMetadata, len(slot))
		for i := range next {
			slot[i] = rng.IntN(len(live))
			p := pods[slot[i]]
			next[i] = podMeta(p.Namespace, fmt.Sprintf("%s-r%d", p.Labels["app"], i), p.Labels)
		}
		heap0 := heapInUse()
		inf := newFakePodInformer()
		if _, err := NewPodIndex(inf, nil); err != nil {
			b.Fatal(err)
		}
		for _, p := range live {
			inf.add(p)
		}
		start = heapInUse() - heap0
		b.StartTimer()
		for i, p := range next {
			inf.delete(live[slot[i]])
			live[slot[i]] = p
			inf.add(p)
			if i == len(next)/2-1 {
				b.StopTimer()
				settled = heapInUse() - heap0 - start
				b.StartTimer()
			}
		}
		b.StopTimer()
		grown = heapInUse() - heap0 - start - settled
		runtime.KeepAlive(inf)
		runtime.KeepAlive(next)
		runtime.KeepAlive(slot)
		runtime.KeepAlive(live)
		b.StartTimer()
	}
	b.ReportMetric(float64(settled)/float64(len(pods)), "settle-B/pod")
	b.ReportMetric(float64(grown)/float64(len(pods)), "growth-B/pod")
	b.ReportMetric(float64(start)/float64(len(pods)), "held-B/pod")
}
