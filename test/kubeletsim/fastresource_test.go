package kubeletsim

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// render serves one request with h and returns the headers that matter and the decompressed body.
func render(t *testing.T, h http.Handler, header http.Header) (contentType, encoding string, body []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics/resource", nil)
	req.Header = header
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	body = rec.Body.Bytes()
	if enc := rec.Header().Get("Content-Encoding"); enc == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("gzip: %v", err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("gunzip: %v", err)
		}
	}
	return rec.Header().Get("Content-Type"), rec.Header().Get("Content-Encoding"), body
}

// TestFastResourceIsByteIdentical holds the fast renderer to the kubelet's collector: same instant, same bytes,
// same Content-Type and Content-Encoding, through pod additions, removals and an empty node.
func TestFastResourceIsByteIdentical(t *testing.T) {
	s, err := New(Config{Nodes: 2, PodsPerNode: 12, ContainersPerPod: 3, Namespaces: 4})
	if err != nil {
		t.Fatal(err)
	}
	pinned := timeNow().Add(90*time.Second + 123456789)
	timeNow = func() time.Time { return pinned }
	t.Cleanup(func() { timeNow = time.Now })

	compare := func(n *node, what string) {
		t.Helper()
		for _, h := range []http.Header{
			{},
			{"Accept-Encoding": {"gzip"}},
			{"Accept": {"text/plain;version=0.0.4;q=0.9,*/*;q=0.1"}, "Accept-Encoding": {"identity"}},
			{"Accept": {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}},
		} {
			wantCT, wantEnc, want := render(t, n.resourceHandler(), h)
			gotCT, gotEnc, got := render(t, http.HandlerFunc(n.serveFastResource), h)
			if gotCT != wantCT || gotEnc != wantEnc {
				t.Errorf("%s, request %v: headers %q %q, collector's %q %q", what, h, gotCT, gotEnc, wantCT, wantEnc)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s, request %v: body differs from the collector's\ngot:\n%s\nwant:\n%s", what, h, got, want)
			}
		}
	}
	n := s.nodes[0]
	compare(n, "default workload")
	if err := s.SetContainer("sim-ns-1", "sim-pod-0-1", "sidecar", 1, 1<<30); err != nil {
		t.Fatal(err)
	}
	s.RemovePod("sim-ns-0", "sim-pod-0-0")
	compare(n, "after SetContainer and RemovePod")
	for _, p := range s.Pods() {
		if p.Node == n.name {
			s.RemovePod(p.Namespace, p.Name)
		}
	}
	compare(n, "empty node")
}
