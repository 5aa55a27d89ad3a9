package api

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"

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
	plain, ix, indexBytes := labelIndexKeeps(b, pods)
	sel, err := labels.Parse(fmt.Sprintf("app=app-42,pod-template-hash=%x,tier=backend", 42*7919))
	if err != nil {
		b.Fatal(err)
	}
	for _, bench := range []struct {
		name      string
		lister    PodLister
		namespace string
		want      int
	}{
		{"walk", cache.NewGenericLister(plain, podResource), "ns-3", 15},
		{"index", ix, "ns-3", 15},
		// The same selection in every namespace (`kubectl top pods -A -l ...`): its workload's namesakes in the 10
		// namespaces, 150 pods of 30,000.
		{"all-namespaces/walk", cache.NewGenericLister(plain, podResource), metav1.NamespaceAll, 150},
		{"all-namespaces/index", ix, metav1.NamespaceAll, 150},
	} {
		s := podRESTOf(m, bench.lister)
		ctx := genericapirequest.WithNamespace(context.Background(), bench.namespace)
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, err := s.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel})
				if err != nil {
					b.Fatal(err)
				}
				if n, _ := listed(b, unshared(obj)); n != bench.want {
					b.Fatalf("listed %d pods, want %d", n, bench.want)
				}
			}
			b.ReportMetric(float64(indexBytes), "index-bytes")
		})
		b.Run(bench.name+"/select", func(b *testing.B) { // the pods alone, without the list built of them
			b.ReportAllocs()
			for b.Loop() {
				if objs, err := (podKind{pods: bench.lister}).objects(bench.namespace, sel); err != nil || len(objs) != bench.want {
					b.Fatalf("selected %d pods (%v), want %d", len(objs), err, bench.want)
				}
			}
		})
	}
}

// labelIndexKeeps returns an informer's store of pods, the same with the label index (PodIndex), and what the index
// and its counts keep beyond the store.
func labelIndexKeeps(b *testing.B, pods []*metav1.PartialObjectMetadata) (cache.Indexer, *PodIndex, int64) {
	heap0 := heapInUse()
	plain := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}) // as the server's: no namespace index
	for _, p := range pods {
		_ = plain.Add(p)
	}
	heap1 := heapInUse()
	ix := indexedInformer(b, pods)
	return plain, ix, (heapInUse() - heap1) - (heap1 - heap0)
}

// indexedInformer is a pod informer of pods with the label index.
func indexedInformer(b *testing.B, pods []*metav1.PartialObjectMetadata) *PodIndex {
	inf := newFakePodInformer()
	ix, err := NewPodIndex(inf, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range pods {
		inf.add(p)
	}
	return ix
}

// BenchmarkPodIndexKeeps indexes 30,000 pods as hpaCluster labels them (Deployments': 4,010 distinct label values),
// and the same with a label of each pod's own (a StatefulSet's pod-name: 34,010): B/op is what indexing them
// allocates, kept-bytes what the label index and its counts keep beyond the informer's store.
func BenchmarkPodIndexKeeps(b *testing.B) {
	for _, own := range []bool{false, true} {
		var pods []*metav1.PartialObjectMetadata
		hpaCluster(func(ns, name string, l map[string]string) {
			if own {
				l["statefulset.kubernetes.io/pod-name"] = name
			}
			pods = append(pods, podMeta(ns, name, l))
		})
		name := "deployments"
		if own {
			name = "statefulsets"
		}
		b.Run(name, func(b *testing.B) {
			_, ix, kept := labelIndexKeeps(b, pods)
			runtime.KeepAlive(ix)
			b.ReportAllocs()
			for b.Loop() {
				indexedInformer(b, pods)
			}
			b.ReportMetric(float64(kept), "kept-bytes")
		})
	}
}
