package api

import (
	"context"
	"fmt"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/component-base/metrics/testutil"
)

// BenchmarkDistinctAllMatchingSelectors is issue 26's attack within one collection: one user lists every pod of
// 30,000 with a new selector each time (`x!=u1-v<i>`, matching every pod), and the answer is encoded as JSON, as
// kubectl gets it. Before selections of one set of pods shared a build, each list made a full build, list and
// 12 MB encoding that nobody read again. A kept full list keeps its entries and encodings, not its items
// (leanlist.go), so the build and its encoding are shared at the default --reader-cache-bytes (64 MiB, a 1 GiB
// memory limit's sixteenth) as at 256 MiB (a 4 GiB limit).
func BenchmarkDistinctAllMatchingSelectors(b *testing.B) {
	for _, budget := range []int64{64 << 20, 256 << 20} {
		b.Run(fmt.Sprintf("reader-cache=%dMiB", budget>>20), func(b *testing.B) {
			s, enc := storedPods30k(budget)
			ctx := genericapirequest.WithNamespace(context.Background(), metav1.NamespaceAll)
			registerMetrics()
			before, _ := testutil.GetCounterMetricValue(buildsMade)
			b.ReportAllocs()
			var size int
			for i := 0; b.Loop(); i++ {
				sel, err := labels.Parse(fmt.Sprintf("x!=u1-v%d", i))
				if err != nil {
					b.Fatal(err)
				}
				obj, err := s.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel})
				if err != nil {
					b.Fatal(err)
				}
				w := &countingWriter{}
				if err := enc.Encode(obj, w); err != nil {
					b.Fatal(err)
				}
				if n, _ := listed(b, obj); n != 30000 {
					b.Fatalf("listed %d pods, want 30000", n)
				}
				size = w.n
			}
			b.ReportMetric(float64(size), "bytes/list")
			after, _ := testutil.GetCounterMetricValue(buildsMade)
			b.ReportMetric((after-before)/float64(b.N), "builds/op")
		})
	}
}
