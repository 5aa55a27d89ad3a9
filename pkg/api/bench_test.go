package api

import (
	"context"
	"fmt"
	"io"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
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
