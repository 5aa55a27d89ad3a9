package api

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	s := NewPodStorage(m, podLister(metas...))
	ctx := genericapirequest.WithNamespace(context.Background(), metav1.NamespaceAll)
	list := func(b *testing.B) runtime.Object {
		obj, err := s.List(ctx, &metainternalversion.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
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
		info, ok := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), mediaType)
		if !ok {
			b.Fatalf("no serializer for %s", mediaType)
		}
		enc := Codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion)
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
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	st := storage.New(storage.Options{Source: "prometheus", Resolution: 15 * time.Second, Now: func() time.Time { return sampleTime }})
	batch := &storage.Batch{CPU: storage.CPURate, Window: time.Minute}
	for n := 0; n < 1000; n++ {
		for p := 0; p < 30; p++ {
			ns, name := fmt.Sprintf("ns-%d", p%10), fmt.Sprintf("app-%d-%d", n, p)
			_ = indexer.Add(podMeta(ns, name, map[string]string{"app": name}))
			for _, c := range []string{"app", "sidecar"} {
				batch.Containers = append(batch.Containers, storage.ContainerSample{Namespace: ns, Pod: name, Container: c,
					Sample: storage.Sample{Timestamp: sampleTime, CPU: 0.123456789, Memory: 100 << 20}})
			}
		}
	}
	st.Store(batch)
	st.EndCycle(true, nil)
	s := NewPodStorage(st, cache.NewGenericLister(indexer, podResource))
	ctx := genericapirequest.WithNamespace(context.Background(), metav1.NamespaceAll)
	info, _ := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	enc := Codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion)
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
					l, ok := obj.(*metrics.PodMetricsList)
					if !ok || l.Continue == "" {
						break
					}
					opts = &metainternalversion.ListOptions{Limit: tc.limit, Continue: l.Continue}
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
