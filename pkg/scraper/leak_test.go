package scraper

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestNoLeaksAcrossFailingCycles runs 100 collection cycles against a healthy kubelet and five broken ones into
// real storage: afterwards goroutines and heap must be back where they were after the first cycles, so a kubelet
// that misbehaves for days costs nothing that accumulates.
func TestNoLeaksAcrossFailingCycles(t *testing.T) {
	if testing.Short() {
		t.Skip("100 cycles")
	}
	fixture := readFixture(t, "metrics-resource-30pods.txt")
	release := make(chan struct{})
	handlers := map[string]http.HandlerFunc{
		"status-500": func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
		"hangs-after-headers": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		},
		"truncated": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(fixture)))
			_, _ = w.Write(fixture[:len(fixture)/3])
			panic(http.ErrAbortHandler)
		},
		"garbage":  func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("\x00\x01 not metrics {{{\n")) },
		"oversize": func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(append(fixture, fixture...)) },
	}
	// The healthy kubelet stamps its samples with the time of each request, as a real one does, so every cycle
	// stores a new sample.
	healthy := kubelet(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(bytes.ReplaceAll(fixture, []byte(" 1795262400000"), []byte(" "+strconv.FormatInt(time.Now().UnixMilli(), 10))))
	})
	nodes := []*corev1.Node{nodeFor(t, "healthy", healthy)}
	for name, h := range handlers {
		nodes = append(nodes, nodeFor(t, name, kubelet(t, h)))
	}
	t.Cleanup(func() { close(release) })

	store := storage.New(storage.Options{Resolution: time.Second})
	s, err := newScraper(Options{InsecureTLS: true, UseNodeStatusPort: true, Timeout: 100 * time.Millisecond,
		MaxResponseBytes: int64(len(fixture)) + 1024}, &fakeLister{nodes: nodes}, stored{store})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 3; i++ { // warm up: connections, series, view
		s.collect(ctx)
	}
	goroutines, heap := settle()
	for i := 0; i < 100; i++ {
		s.collect(ctx)
	}
	if h := store.Latest().Health(); h.LastError == nil || h.Cycles != 103 {
		t.Fatalf("health %+v: want 103 cycles, each with the broken nodes' error", h)
	}
	if _, ok := store.Latest().Node("healthy"); !ok {
		t.Fatal("the healthy node is not served")
	}
	// Closing connections and goroutines happens asynchronously: give them a bounded moment. A slow machine may
	// leave one spare keep-alive connection per kubelet (a request that timed out while its dial was in flight
	// hands the new connection to the idle pool): that is three goroutines per node (the transport's read and
	// write loops, the fake kubelet's conn), bounded by the node count. A leak grows with the 100 cycles instead.
	slack := 3 * len(nodes)
	var g2 int
	var h2 uint64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if g2, h2 = settle(); g2 <= goroutines+slack {
			break
		}
	}
	if g2 > goroutines+slack {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines %d -> %d after 100 cycles (at most %d more expected):\n%s", goroutines, g2, slack, buf[:runtime.Stack(buf, true)])
	}
	if h2 > heap+4<<20 {
		t.Errorf("heap %d -> %d bytes after 100 cycles: more than 4 MiB kept", heap, h2)
	}
	t.Logf("goroutines %d -> %d, heap %d -> %d KiB", goroutines, g2, heap>>10, h2>>10)
}

func settle() (int, uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.HeapAlloc
}
