package scraper

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// slowKubelets answers every request after latency with the same gzip body, without a network: what is measured
// is the scraper's own state, not connections (those cost the same per node at any size).
type slowKubelets struct {
	body    []byte
	latency time.Duration
}

func (k slowKubelets) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case <-time.After(k.latency):
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: http.StatusOK, ContentLength: -1, Request: req,
		Header: http.Header{"Content-Type": {"text/plain; version=0.0.4"}, "Content-Encoding": {"gzip"}},
		Body:   io.NopCloser(bytes.NewReader(k.body))}, nil
}

// buildingStore is an Append that keeps nothing but, like storage while it builds a snapshot of a large
// cluster, makes appends wait 100 ms out of every 250 ms, so that parsed responses queue up at the lock as they
// do at 10,000 nodes.
func buildingStore() (add func(*storage.Batch) storage.Rejection, stop func()) {
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				mu.Lock()
				time.Sleep(100 * time.Millisecond)
				mu.Unlock()
			}
		}
	}()
	return func(b *storage.Batch) storage.Rejection {
		mu.Lock()
		defer mu.Unlock()
		return discard(b)
	}, func() { close(done) }
}

// BenchmarkRetainedPerNode measures what the scraper keeps per node between cycles (heap live after a forced
// collection) and the heap's high-water mark per node, at 1,000 and 10,000 simulated 30-pod nodes answering in
// 50 ms, with a 1 s budget and appends that wait for snapshot builds (buildingStore): the pace then runs 100 and 1,000 workers, as a 10 s budget does at 1,000 and 10,000
// nodes when handshakes or a busy host make scrapes take 0.5 s (BENCHMARKS.md: the cold start at 10,000 nodes).
// The per-node figures should not grow with the cluster, and a warm cycle should allocate little per node (its
// responses borrow buffers and gzip readers kept from the previous cycle).
func BenchmarkRetainedPerNode(b *testing.B) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(readFixture(b, "metrics-resource-30pods.txt"))
	_ = zw.Close()
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			l := &fakeLister{}
			for i := range n {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", i)}}
				node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP,
					Address: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}}
				l.nodes = append(l.nodes, node)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			s, err := New(Options{Timeout: time.Second, Compression: true}, l)
			if err != nil {
				b.Fatal(err)
			}
			s.client.rt = slowKubelets{body: gz.Bytes(), latency: 50 * time.Millisecond}
			add, stop := buildingStore()
			defer stop()
			s.Collect(context.Background(), add) // the pace's first cycle, sized from nothing
			var start runtime.MemStats
			runtime.ReadMemStats(&start)
			cycles := 0
			for b.Loop() {
				s.Collect(context.Background(), add)
				cycles++
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			// What a warm cycle allocates per node: the garbage collector's work follows it.
			b.ReportMetric(float64(after.TotalAlloc-start.TotalAlloc)/float64(cycles*n), "alloc-B/node/cycle")
			runtime.KeepAlive(s)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "live-B/node")
			b.ReportMetric(float64(after.HeapSys-before.HeapSys)/float64(n), "heapsys-B/node")
			b.ReportMetric(float64(len(s.workers)), "workers")
		})
	}
}
