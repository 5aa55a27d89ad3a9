package scraper

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// discard keeps nothing, so a benchmark measures the scraper alone.
func discard(*storage.Batch) storage.Rejection { return storage.Rejection{} }

// http2Transport is the transport the scraper had before it asked kubelets for HTTP/1.1 only, for comparison.
func http2Transport(b *testing.B, o Options) http.RoundTripper {
	cfg := o.restConfig()
	cfg.TLSClientConfig.NextProtos = nil
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return rt
}

// BenchmarkScrape is one worker scraping one 30-pod node on loopback again and again: fetch, parse and store, as
// a cycle does per node, with the worker's buffers warm. "http" is plain HTTP/1.1 uncompressed; "https-h1-gzip" is
// what the scraper asks of a kubelet (TLS, HTTP/1.1, gzip; the server sends bytes compressed once, so that most of
// the time measured is the client's), "https-h2-gzip" the same over HTTP/2, which kubelets offer;
// "https-h1-gzip-redial" closes the connection at every second scrape, as --kubelet-connection-max-age does once in
// a connection's life, so that twice its difference from https-h1-gzip is what a new connection costs (both sides'
// handshake, in one process).
func BenchmarkScrape(b *testing.B) {
	body := readFixture(b, "metrics-resource-30pods.txt")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(body)
	_ = zw.Close()
	for _, tc := range []struct {
		name   string
		tls    bool
		http1  bool
		redial bool // every second scrape closes its connection: twice its excess over https-h1-gzip is a new connection
	}{{"http", false, true, false}, {"https-h1-gzip", true, true, false}, {"https-h2-gzip", true, false, false},
		{"https-h1-gzip-redial", true, true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
				if r.Header.Get("Accept-Encoding") == "gzip" {
					w.Header().Set("Content-Encoding", "gzip")
					_, _ = w.Write(gz.Bytes())
					return
				}
				_, _ = w.Write(body)
			})
			srv := httptest.NewUnstartedServer(h)
			o := Options{Scheme: "http", UseNodeStatusPort: true}
			if tc.tls {
				srv.EnableHTTP2 = true
				srv.StartTLS()
				o = Options{InsecureTLS: true, UseNodeStatusPort: true, Compression: true}
				if tc.redial {
					o.ConnMaxAge = time.Nanosecond
				}
			} else {
				srv.Start()
			}
			b.Cleanup(srv.Close)
			node := nodeFor(b, "n", srv)
			s, err := New(o, &fakeLister{})
			if err != nil {
				b.Fatal(err)
			}
			if !tc.http1 {
				s.client.rt = http2Transport(b, o)
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
		})
	}
}
