package adapter

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// vectorBody is a successful instant-query response of n container series, as Prometheus writes it.
func vectorBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metric":{"container":"app","namespace":"ns-%d","pod":"pod-%d"},"value":[1795262400.123,"0.%09d"]}`,
			i%100, i, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// BenchmarkQuery60kContainers runs one query whose answer is 60,000 container series (1,000 nodes of 30 two-
// container pods) over loopback HTTP: reading and decoding the response is the Prometheus source's cost per query.
func BenchmarkQuery60kContainers(b *testing.B) {
	body := vectorBody(60_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	b.Cleanup(srv.Close)
	c, err := newClient(ClientOptions{URL: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		vec, _, err := c.query(ctx, "q", time.Now())
		if err != nil || len(vec) != 60_000 {
			b.Fatalf("%d samples, %v", len(vec), err)
		}
	}
}
