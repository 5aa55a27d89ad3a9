package api

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// BenchmarkListPods lists every pod of a 1,000-node x 30-pod x 2-container cluster (30,000 PodMetrics) and encodes
// the list as the server does for kubectl (JSON) and for controllers (protobuf).
func BenchmarkListPods(b *testing.B) {
	m := &fakeMetrics{pods: map[string]storage.PodPoint{}}
	var metas []*metav1.PartialObjectMetadata
	for n := 0; n < 1000; n++ {
		for p := 0; p < 30; p++ {
			ns, name := fmt.Sprintf("ns-%d", p%10), fmt.Sprintf("app-%d-%d", n, p)
			metas = append(metas, podMeta(ns, name, map[string]string{"app": name}))
			m.pods[ns+"/"+name] = podPoint(
				storage.ContainerPoint{Name: "app", Usage: storageUsage(123_456_789, 100<<20)},
				storage.ContainerPoint{Name: "sidecar", Usage: storageUsage(1_234_567, 10<<20)})
		}
	}
	s := podRESTOf(m, podLister(metas...))
	ctx := genericapirequest.WithNamespace(context.Background(), metav1.NamespaceAll)
	list := func(b *testing.B) runtime.Object {
		obj, err := s.List(ctx, &metainternalversion.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		// Every List is of a new collection (fakeMetrics), so the list is built each time; it is encoded plain,
		// as the server encodes a list it does not share.
		obj = unshared(obj)
		if n := len(obj.(*metrics.PodMetricsList).Items); n != 30000 {
			b.Fatalf("listed %d pods, want 30000", n)
		}
		return obj
	}
	b.Run("list", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			list(b)
		}
	})
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
		if !ok {
			b.Fatalf("no serializer for %s", mediaType)
		}
		enc := codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion)
		b.Run("list+encode/"+mediaType, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				w := &countingWriter{}
				if err := enc.Encode(list(b), w); err != nil {
					b.Fatal(err)
				}
				size = w.n
			}
			b.ReportMetric(float64(size), "bytes/list")
		})
		// As the server encodes a kept list (leanList), from a new build each time: its first encoding.
		b.Run("list+encode-kept/"+mediaType, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, err := s.List(ctx, &metainternalversion.ListOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if err := enc.Encode(obj, &countingWriter{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)

// BenchmarkListPodsRepeated is many clients reading every pod (30,000, JSON) within one collection, from real
// storage: "shared" is a plain list, built and encoded once per collection and copied to each later request;
// "paged" reads them in pages of 1,000, each page built from the collection's shared index and encoded for its
// request (before pages built from that index, every page built the whole list: 30 lists per read).
func BenchmarkListPodsRepeated(b *testing.B) {
	s, enc := storedPods30k(0)
	ctx := genericapirequest.WithNamespace(context.Background(), metav1.NamespaceAll)
	for _, tc := range []struct {
		name  string
		limit int64
	}{{"paged", 1000}, {"shared", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				w := &countingWriter{}
				for opts := (&metainternalversion.ListOptions{Limit: tc.limit}); ; {
					obj, err := s.List(ctx, opts)
					if err != nil {
						b.Fatal(err)
					}
					if err := enc.Encode(obj, w); err != nil {
						b.Fatal(err)
					}
					if _, cont := listed(b, obj); cont == "" {
						break
					} else {
						opts = &metainternalversion.ListOptions{Limit: tc.limit, Continue: cont}
					}
				}
				size = w.n
			}
			if size < 30000*100 {
				b.Fatalf("encoded %d bytes: not 30,000 pods", size)
			}
			b.ReportMetric(float64(size), "bytes/list")
		})
	}
}

// storedPods30k is the PodStorage of a 1,000-node x 30-pod x 2-container cluster (30,000 pods, labelled app=<name>)
// in real storage after one collection, its pods read through the label index as cmd serves them, with
// readerCacheBytes (0: the default), and the JSON encoder kubectl's lists get.
func storedPods30k(readerCacheBytes int64) (*podREST, runtime.Encoder) {
	inf := newFakePodInformer()
	ix, err := NewPodIndex(inf, nil)
	if err != nil {
		panic(err)
	}
	st := storage.New(storage.Options{Source: "prometheus", Resolution: 15 * time.Second, Now: func() time.Time { return sampleTime }})
	batch := &storage.Batch{CPU: storage.CPURate, Window: time.Minute}
	for n := 0; n < 1000; n++ {
		for p := 0; p < 30; p++ {
			ns, name := fmt.Sprintf("ns-%d", p%10), fmt.Sprintf("app-%d-%d", n, p)
			inf.add(podMeta(ns, name, map[string]string{"app": name}))
			st.PodBound(ns, name, fmt.Sprintf("node-%d", n))
			for _, c := range []string{"app", "sidecar"} {
				batch.Containers = append(batch.Containers, storage.ContainerSample{Namespace: ns, Pod: name, Container: c,
					Sample: storage.Sample{Timestamp: sampleTime, CPU: 0.123456789, Memory: 100 << 20}})
			}
		}
	}
	cy := st.BeginCycle()
	cy.Append(batch)
	cy.Commit(storage.Outcome{Success: true})
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	s := newPodStorage(st, ix, newReaders(Deps{ReaderCacheBytes: readerCacheBytes}))
	return s, codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion)
}

// BenchmarkWatchersAndPages is the load of issue 14 scaled to a benchmark: per collection (one op), 100 watchers of
// every pod each receive and encode (JSON, as the apiserver's watch handler does, through runtime.CacheableObject
// when the object offers it) every event, and 20 clients page through every pod 10 at a time, encoding each page.
// 100 nodes x 20 pods x 2 containers (2,000 pods). It uses only what the API offered before readers shared work,
// so the same file measures both.
func BenchmarkWatchersAndPages(b *testing.B) { watchersAndPages(b, 1) }

// BenchmarkWatchersAndPagesInterim is BenchmarkWatchersAndPages with each collection landing in 5 parts, published
// as they land (storage.Cycle.Publish, as a cycle longer than a second does): the same events per collection, in 5
// deliveries from 5 builds of the watched selection instead of one.
func BenchmarkWatchersAndPagesInterim(b *testing.B) { watchersAndPages(b, 5) }

func watchersAndPages(b *testing.B, parts int) {
	const nodes, podsPerNode, watchers, pagers, pageSize = 100, 20, 100, 20, 10
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	now := sampleTime
	var mu sync.Mutex
	st := storage.New(storage.Options{Source: "prometheus", Resolution: 15 * time.Second,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	cycle := func(cpu float64) {
		mu.Lock()
		now = now.Add(15 * time.Second)
		ts := now
		mu.Unlock()
		gen := st.Latest().Generation()
		cy := st.BeginCycle()
		batch := &storage.Batch{CPU: storage.CPURate, Window: time.Minute}
		for n := 0; n < nodes; n++ {
			if n > 0 && n%(nodes/parts) == 0 { // a part has landed: publish it a second after the previous one
				cy.Append(batch)
				batch.Containers = batch.Containers[:0]
				mu.Lock()
				now = now.Add(storage.MinPublishInterval)
				mu.Unlock()
				cy.Publish()
			}
			for p := 0; p < podsPerNode; p++ {
				ns, name := fmt.Sprintf("ns-%d", p%10), fmt.Sprintf("app-%d-%d", n, p)
				for _, c := range []string{"app", "sidecar"} {
					batch.Containers = append(batch.Containers, storage.ContainerSample{Namespace: ns, Pod: name, Container: c,
						Sample: storage.Sample{Timestamp: ts, CPU: cpu, Memory: 100 << 20}})
				}
			}
		}
		cy.Append(batch)
		cy.Commit(storage.Outcome{Success: true})
		if n := st.Latest().Generation() - gen; n != uint64(parts) && st.Latest().Health().Cycles > 1 {
			b.Fatalf("%d publications in a collection of %d parts", n, parts)
		}
	}
	for n := 0; n < nodes; n++ {
		for p := 0; p < podsPerNode; p++ {
			ns, name := fmt.Sprintf("ns-%d", p%10), fmt.Sprintf("app-%d-%d", n, p)
			_ = indexer.Add(podMeta(ns, name, map[string]string{"app": name}))
			st.PodBound(ns, name, fmt.Sprintf("node-%d", n))
		}
	}
	cycle(0.1)
	s := podRESTOf(st, cache.NewGenericLister(indexer, podResource))
	ctx, cancel := context.WithCancel(genericapirequest.WithNamespace(context.Background(), metav1.NamespaceAll))
	defer cancel()
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	enc := codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion)
	const total = nodes * podsPerNode

	ws := make([]watch.Interface, watchers)
	for i := range ws {
		w, err := s.Watch(ctx, &metainternalversion.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		ws[i] = w
		drain(b, enc, w, total) // the initial ADDED events
	}
	page := func() {
		opts := &metainternalversion.ListOptions{Limit: pageSize}
		seen := 0
		for {
			obj, err := s.List(ctx, opts)
			if err != nil {
				b.Fatal(err)
			}
			if err := enc.Encode(obj, io.Discard); err != nil {
				b.Fatal(err)
			}
			n, cont := listed(b, obj)
			if seen += n; cont == "" {
				break
			}
			opts = &metainternalversion.ListOptions{Limit: pageSize, Continue: cont}
		}
		if seen != total {
			b.Fatalf("paged through %d pods, want %d", seen, total)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var wg sync.WaitGroup
		for _, w := range ws { // reading while the collection lands, as watchers do
			wg.Add(1)
			go func() { defer wg.Done(); drain(b, enc, w, total) }()
		}
		cycle(0.1 + float64(i%2)*0.1)
		for p := 0; p < pagers; p++ {
			wg.Add(1)
			go func() { defer wg.Done(); page() }()
		}
		wg.Wait()
	}
}

// drain reads n events from w and encodes each as the apiserver's watch handler would.
func drain(b *testing.B, enc runtime.Encoder, w watch.Interface, n int) {
	id := runtime.Identifier("bench-watch-json")
	for i := 0; i < n; i++ {
		ev, ok := <-w.ResultChan()
		if !ok {
			b.Error("watch closed")
			return
		}
		encode := func(obj runtime.Object, w io.Writer) error { return enc.Encode(obj, w) }
		var err error
		if co, ok := ev.Object.(runtime.CacheableObject); ok {
			err = co.CacheEncode(id, encode, io.Discard)
		} else {
			err = encode(ev.Object, io.Discard)
		}
		if err != nil {
			b.Error(err)
			return
		}
	}
}

// listed returns a list's length and continue token, whatever list type (shared or not) the storage answered.
func listed(b *testing.B, obj runtime.Object) (int, string) {
	if l, ok := obj.(*leanList[storage.PodPoint]); ok { // a full list: its entries, without making its items
		return len(l.core.b.entries), ""
	}
	lm, err := meta.ListAccessor(obj)
	if err != nil {
		b.Fatal(err)
	}
	return meta.LenList(obj), lm.GetContinue()
}
