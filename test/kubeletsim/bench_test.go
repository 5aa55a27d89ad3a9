package kubeletsim

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkResourceScrape measures rendering one node's /metrics/resource (30 pods x 2 containers, the scale
// benchmark's shape) through the kubelet's collector and registry, without the network.
func BenchmarkResourceScrape(b *testing.B) {
	benchmarkHandler(b, func(n *node) http.Handler { return n.resourceHandler() })
}

// BenchmarkFastResourceScrape is the same through the FastResource renderer.
func BenchmarkFastResourceScrape(b *testing.B) {
	benchmarkHandler(b, func(n *node) http.Handler { return http.HandlerFunc(n.serveFastResource) })
}

// BenchmarkCadvisorScrape is the same for /metrics/cadvisor.
func BenchmarkCadvisorScrape(b *testing.B) {
	benchmarkHandler(b, func(n *node) http.Handler { return n.cadvisorHandler() })
}

func benchmarkHandler(b *testing.B, h func(*node) http.Handler) {
	s, err := New(Config{Nodes: 1, PodsPerNode: 30, ContainersPerPod: 2, Namespaces: 10})
	if err != nil {
		b.Fatal(err)
	}
	handler := h(s.nodes[0])
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/op-body")
}

// BenchmarkNew measures building a 1,000-node x 30-pod sim.
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(Config{Nodes: 1000, PodsPerNode: 30, ContainersPerPod: 2, Namespaces: 10}); err != nil {
			b.Fatal(err)
		}
	}
}
