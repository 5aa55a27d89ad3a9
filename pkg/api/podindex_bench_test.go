package api

import (
	"context"
	"fmt"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// hpaCluster is 30,000 pods (1,000 nodes x 30) in 10 namespaces of 3,000, each namespace 200 workloads of 15 pods
// labeled as a Deployment labels them; add adds each pod's metadata.
func hpaCluster(add func(ns, name string, l map[string]string)) {
	for i := 0; i < 30000; i++ {
		ns, app := fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("app-%d", (i/10)%200)
		add(ns, fmt.Sprintf("%s-%d", app, i), map[string]string{
			"app": app, "pod-template-hash": fmt.Sprintf("%x", (i/10)%200*7919), "tier": "backend"})
	}
}

// BenchmarkHPASelection lists one HPA's selection (15 of a namespace's 3,000 pods, 30,000 in all) as the HPA
// controller does, a new build each time: walking the namespace, and reading the label index (select: the pods
// alone, without building the list of them). index-bytes is what
// the label index and its counts keep for the 30,000 pods, beyond the informer's own store.
func BenchmarkHPASelection(b *testing.B) {
	m := &fakeMetrics{pods: map[string]storage.PodPoint{}}
	var pods []*metav1.PartialObjectMetadata
	hpaCluster(func(ns, name string, l map[string]string) {
		pods = append(pods, podMeta(ns, name, l))
		m.pods[ns+"/"+name] = podPoint(storage.ContainerPoint{Name: "app", Usage: storageUsage(123_456_789, 100<<20)})
	})
	heap0 := heapInUse()
	plain := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		_ = plain.Add(p)
	}
	heap1 := heapInUse()
	inf := newFakePodInformer()
	ix, err := NewPodIndex(inf)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range pods {
		inf.add(p)
	}
	indexBytes := (heapInUse() - heap1) - (heap1 - heap0)
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-3")
	sel, err := labels.Parse(fmt.Sprintf("app=app-42,pod-template-hash=%x,tier=backend", 42*7919))
	if err != nil {
		b.Fatal(err)
	}
	for _, bench := range []struct {
		name   string
		lister PodLister
	}{
		{"walk", cache.NewGenericLister(plain, podResource)},
		{"index", ix},
	} {
		s := podRESTOf(m, bench.lister)
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, err := s.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel})
				if err != nil {
					b.Fatal(err)
				}
				if l, ok := unshared(obj).(*metrics.PodMetricsList); !ok || len(l.Items) != 15 {
					b.Fatalf("listed %T, want 15 pods", obj)
				}
			}
			b.ReportMetric(float64(indexBytes), "index-bytes")
		})
		b.Run(bench.name+"/select", func(b *testing.B) { // the pods alone, without the list built of them
			b.ReportAllocs()
			for b.Loop() {
				if objs, err := (podKind{pods: bench.lister}).objects("ns-3", sel); err != nil || len(objs) != 15 {
					b.Fatalf("selected %d pods (%v), want 15", len(objs), err)
				}
			}
		})
	}
}
