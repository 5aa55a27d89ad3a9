package scraper

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// TestLogsOncePerStreak checks that a failing node is logged once per failure streak, plus one line on recovery.
func TestLogsOncePerStreak(t *testing.T) {
	logs := captureLogs(t)
	var broken atomic.Bool
	broken.Store(true)
	body := readFixture(t, "metrics-resource-30pods.txt")
	srv := kubelet(t, func(w http.ResponseWriter, _ *http.Request) {
		if broken.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(body)
	})
	store := newFakeStore()
	s, err := newScraper(Options{InsecureTLS: true, UseNodeStatusPort: true},
		&fakeLister{nodes: []*corev1.Node{nodeFor(t, "streaky", srv)}}, store)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.collect(context.Background())
	}
	broken.Store(false)
	s.collect(context.Background())
	s.collect(context.Background())
	klog.Flush()
	out := logs.String()
	if n := strings.Count(out, `"Failed to scrape node"`); n != 1 {
		t.Errorf("%d failure lines for 3 failed scrapes, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, `"Scraping node recovered"`); n != 1 || !strings.Contains(out, "failedScrapes=3") {
		t.Errorf("%d recovery lines, want 1 saying failedScrapes=3:\n%s", n, out)
	}
}

// captureLogs sends klog's output to the returned buffer until the test ends. Call klog.Flush before reading it.
func captureLogs(t *testing.T) *syncBuffer {
	var logs syncBuffer
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	klog.SetOutputBySeverity("INFO", &logs) // every severity reaches the INFO stream once
	t.Cleanup(func() { klog.SetOutput(io.Discard); klog.LogToStderr(true) })
	return &logs
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogsForeignPodsOncePerStreak: a kubelet reporting pods bound to other nodes is logged once, naming the node
// and an example pod, until its reports are its own again.
func TestLogsForeignPodsOncePerStreak(t *testing.T) {
	var logs syncBuffer
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	klog.SetOutputBySeverity("INFO", &logs)
	t.Cleanup(func() { klog.SetOutput(io.Discard); klog.LogToStderr(true) })

	body := readFixture(t, "metrics-resource-30pods.txt")
	store := newFakeStore()
	s, err := newScraper(Options{InsecureTLS: true, UseNodeStatusPort: true},
		&fakeLister{nodes: []*corev1.Node{nodeFor(t, "old-node", kubelet(t, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(body)
		}))}}, store)
	if err != nil {
		t.Fatal(err)
	}
	setForeign := func(n int) {
		store.mu.Lock()
		defer store.mu.Unlock()
		store.reject.Foreign, store.reject.ForeignPod = n, ""
		if n > 0 {
			store.reject.ForeignPod = `ns/web-0 (bound to node "new-node")`
		}
	}
	setForeign(2)
	for range 3 {
		s.collect(context.Background())
	}
	setForeign(0)
	s.collect(context.Background())
	s.collect(context.Background())
	klog.Flush()
	out := logs.String()
	if n := strings.Count(out, `"Kubelet reports pods bound to other nodes; their samples are dropped"`); n != 1 ||
		!strings.Contains(out, `node="old-node"`) || !strings.Contains(out, `new-node`) {
		t.Errorf("%d foreign lines for 3 scrapes, want 1 naming old-node and the pod's node:\n%s", n, out)
	}
	if n := strings.Count(out, `"Kubelet no longer reports pods of other nodes"`); n != 1 {
		t.Errorf("%d lines for the end of the streak, want 1:\n%s", n, out)
	}
}
