package api

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

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

// BenchmarkWatchersAndPages is the load of issue 14 scaled to a benchmark: per collection (one op), 100 watchers of
// every pod each receive and encode (JSON, as the apiserver's watch handler does, through runtime.CacheableObject
// when the object offers it) every event, and 20 clients page through every pod 10 at a time, encoding each page.
// 100 nodes x 20 pods x 2 containers (2,000 pods). It uses only what the API offered before readers shared work,
// so the same file measures both.
func BenchmarkWatchersAndPages(b *testing.B) {
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
		batch := &storage.Batch{CPU: storage.CPURate, Window: time.Minute}
		for n := 0; n < nodes; n++ {
			for p := 0; p < podsPerNode; p++ {
				ns, name := fmt.Sprintf("ns-%d", p%10), fmt.Sprintf("app-%d-%d", n, p)
				for _, c := range []string{"app", "sidecar"} {
					batch.Containers = append(batch.Containers, storage.ContainerSample{Namespace: ns, Pod: name, Container: c,
						Sample: storage.Sample{Timestamp: ts, CPU: cpu, Memory: 100 << 20}})
				}
			}
		}
		st.Store(batch)
		st.EndCycle(true, nil)
	}
	for n := 0; n < nodes; n++ {
		for p := 0; p < podsPerNode; p++ {
			ns, name := fmt.Sprintf("ns-%d", p%10), fmt.Sprintf("app-%d-%d", n, p)
			_ = indexer.Add(podMeta(ns, name, map[string]string{"app": name}))
		}
	}
	cycle(0.1)
	s := NewPodStorage(st, cache.NewGenericLister(indexer, podResource))
	ctx, cancel := context.WithCancel(genericapirequest.WithNamespace(context.Background(), metav1.NamespaceAll))
	defer cancel()
	info, _ := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	enc := Codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion)
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
			list := obj.(*metrics.PodMetricsList)
			seen += len(list.Items)
			if list.Continue == "" {
				break
			}
			opts = &metainternalversion.ListOptions{Limit: pageSize, Continue: list.Continue}
		}
		if seen != total {
			b.Fatalf("paged through %d pods, want %d", seen, total)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		cycle(0.1 + float64(i%2)*0.1)
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Add(1)
			go func() { defer wg.Done(); drain(b, enc, w, total) }()
		}
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
