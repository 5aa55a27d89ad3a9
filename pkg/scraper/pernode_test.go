package scraper

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// BenchmarkRetainedPerNode measures what the scraper keeps per node between cycles (heap live after a forced
// collection) and the heap's high-water mark per node, at 1,000 and 10,000 simulated 30-pod nodes answering in
// 50 ms, with a 1 s budget: the pace then runs 100 and 1,000 workers, as a 10 s budget does at 1,000 and 10,000
// nodes when handshakes or a busy host make scrapes take 0.5 s (BENCHMARKS.md: the cold start at 10,000 nodes).
// The per-node figures should not grow with the cluster.
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
			s, err := New(Options{Timeout: time.Second, Resolution: time.Second, Compression: true}, l)
			if err != nil {
				b.Fatal(err)
			}
			s.client.rt = slowKubelets{body: gz.Bytes(), latency: 50 * time.Millisecond}
			for b.Loop() {
				s.Collect(context.Background(), discard)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(s)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "live-B/node")
			b.ReportMetric(float64(after.HeapSys-before.HeapSys)/float64(n), "heapsys-B/node")
			b.ReportMetric(float64(len(s.workers)), "workers")
		})
	}
}
