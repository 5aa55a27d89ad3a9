package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestGetKeepsItsConnection: lists decoded by get leave their connection for the next request, as a client
// reading to the end does; the server sees one connection for five lists (five before: the body closed after the
// object, before the encoder's newline, closed each one).
func TestGetKeepsItsConnection(t *testing.T) {
	var conns atomic.Int32
	// A list larger than the server's write buffer is sent in chunks, as the API server's lists are: the last
	// chunk's end comes in a read of its own.
	body := `{"kind":"PodMetricsList","metadata":{"resourceVersion":"` + strings.Repeat("1", 8<<10) + `"},"items":[]}` + "\n"
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
	}))
	srv.Listener, _ = net.Listen("tcp", "127.0.0.1:0")
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	hc := srv.Client()
	for i := 0; i < 5; i++ {
		var out map[string]any
		if code, _, err := get(context.Background(), hc, srv.URL, "application/json", &out); err != nil || code != 200 {
			t.Fatalf("get: %d %v", code, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 lists took %d connections, want 1", n)
	}
}
