package api

import (
	"fmt"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// BenchmarkEssentialWide (a review's): what essential costs one list of every namespace with a notin of many values
// no pod has, before its build is looked up (outside buildLimit, at every list, a cached one too).
func BenchmarkEssentialWide(b *testing.B) {
	for _, tc := range []struct{ namespaces, values int }{{10, 2000}, {1000, 2000}} {
		b.Run(fmt.Sprintf("ns=%d/values=%d", tc.namespaces, tc.values), func(b *testing.B) {
			_, ix := podPerNamespace(b, tc.namespaces)
			sel := parsed(b, "app notin ("+valueList(tc.values)+")")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ix.essential("", sel)
			}
		})
	}
}

// BenchmarkUpToWide: upTo (called before a build takes its slot: build.fill) of every namespace with an `in`
// of many values: at most maxSetReads counts, or none.
func BenchmarkUpToWide(b *testing.B) {
	_, ix := podPerNamespace(b, 1000)
	sel := parsed(b, "app in ("+valueList(2000)+")")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ix.upTo("", sel)
	}
}

// BenchmarkCachedListWide: the same list of every namespace (`app notin (v0..v1999)`, 14 KB of selector,
// 1,000 namespaces of one pod) again and again: its build is kept after the first, yet each list pays essential.
func BenchmarkCachedListWide(b *testing.B) {
	inf, ix := podPerNamespace(b, 1000)
	c := newCluster(&testing.T{})
	c.pods = inf.indexer
	cpu := map[string]float64{}
	for i := 0; i < 1000; i++ {
		ns := fmt.Sprintf("ns-%d", i)
		c.store.PodBound(ns, "p", "node-a")
		cpu[ns+"/p"] = 0.1
	}
	c.cycle(nil, cpu)
	s := newMetricsREST[storage.PodPoint](c.store, podKind{pods: ix}, newReaders(Deps{}))
	sel := parsed(b, "app notin ("+valueList(2000)+")")
	ctx := genericapirequest.WithNamespace(asUser("u"), "")
	list := func() {
		if _, err := s.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel}); err != nil {
			b.Fatal(err)
		}
	}
	list()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		list()
	}
}
