package scraper

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// discard keeps nothing, so a benchmark measures the scraper alone.
func discard(*storage.Batch) storage.Rejection { return storage.Rejection{} }

// BenchmarkScrape is one worker scraping one 30-pod node over plain HTTP on loopback again and again: fetch,
// parse and store, as a cycle does per node, with the worker's buffers warm.
func BenchmarkScrape(b *testing.B) {
	body := readFixture(b, "metrics-resource-30pods.txt")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	b.Cleanup(srv.Close)
	node := nodeFor(b, "n", srv)
	s, err := New(Options{Scheme: "http", UseNodeStatusPort: true}, &fakeLister{})
	if err != nil {
		b.Fatal(err)
	}
	w, st := &worker{}, &nodeState{parser: newParser()}
	ctx := context.Background()
	if err := s.scrape(ctx, w, node, st, discard); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := s.scrape(ctx, w, node, st, discard); err != nil {
			b.Fatal(err)
		}
	}
}
