package scraper

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// retained is the response-buffer capacity the scraper keeps between scrapes: its workers' and the spares.
func retained(s *Scraper) (total, largest int) {
	bufs := make([][]byte, 0, len(s.workers)+len(s.buffers.free))
	for _, w := range s.workers {
		bufs = append(bufs, w.buf)
	}
	for _, sc := range s.buffers.free {
		bufs = append(bufs, sc.buf)
	}
	for _, b := range bufs {
		total += cap(b)
		largest = max(largest, cap(b))
	}
	return total, largest
}

// TestLargeResponseBuffersAreGivenBack has each of 50 workers meet one 10 MB node: afterwards they must not keep
// 50 x 10 MB, while buffers of the size the cluster's nodes answer with stay for the next scrape.
func TestLargeResponseBuffersAreGivenBack(t *testing.T) {
	fixture := readFixture(t, "metrics-resource-30pods.txt")
	// A valid response padded to 10 MB by a line after a NUL byte, where the parser stops: the test moves 500 MB
	// without parsing it.
	big := append(bytes.Clone(fixture), 0)
	big = append(big, bytes.Repeat([]byte("x"), 10_000_000-len(big)-1)...)
	big = append(big, '\n')
	serve := func(body []byte) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	typical, large := serve(fixture), serve(big)
	nodes := []*corev1.Node{nodeFor(t, "large", large)}
	for i := range 49 {
		nodes = append(nodes, nodeFor(t, "typical-"+strconv.Itoa(i), typical))
	}
	store := newFakeStore()
	s := cycle(t, Options{Scheme: "http", Concurrency: 50}, store, nodes...)
	if end := store.lastEnd(t); !end.success || end.err != nil || len(s.workers) != 50 {
		t.Fatalf("first cycle: %v %v with %d workers, want a clean cycle with 50", end.success, end.err, len(s.workers))
	}
	if total, _ := retained(s.Scraper); total == 0 {
		t.Fatal("no buffer kept after a cycle of typical nodes: every scrape would allocate one")
	}

	// Every worker meets the large node, then goes on to a typical one, as across cycles.
	ctx := context.Background()
	for _, w := range s.workers {
		for _, n := range []*corev1.Node{nodes[0], nodes[1]} {
			if err := s.work(ctx, w, n, s.states[n.Name], store.Store); err != nil {
				t.Fatalf("scraping %s: %v", n.Name, err)
			}
		}
	}
	s.collect(ctx)
	total, largest := retained(s.Scraper)
	if largest > retainMin || total > 50*retainMin {
		t.Fatalf("workers keep %d bytes (largest buffer %d) after meeting a 10 MB node: want at most %d each",
			total, largest, retainMin)
	}
	if total == 0 {
		t.Fatal("typical buffers were given back too")
	}
}

func TestRetainFor(t *testing.T) {
	for _, tc := range []struct {
		mean int64
		want int
	}{
		{0, retainMin},
		{20_000, retainMin},
		{37_703, 301_624},    // 30-pod nodes
		{300_000, 2_400_000}, // 250-pod nodes keep their 512 KiB buffers
		{10 << 20, 80 << 20}, // every node that large: each scrape needs that memory anyway
		{1 << 62, 1 << 40},   // no overflow
	} {
		if got := retainFor(tc.mean); got != tc.want {
			t.Errorf("retainFor(%d) = %d, want %d", tc.mean, got, tc.want)
		}
	}
}

// TestSparesFollowThePeak: the spares kept for the next cycle are as many as were borrowed at once in the previous
// one (at least the floor), so a cycle with more responses in hand at once than --kubelet-concurrency does not
// allocate a buffer and a gzip reader per scrape, and a quieter cycle lets the extra go.
func TestSparesFollowThePeak(t *testing.T) {
	p := newBuffers(2)
	borrow := func(n int) []scratch {
		lent := make([]scratch, n)
		for i := range lent {
			lent[i].buf, lent[i].gz = p.lend(0)
			if lent[i].buf == nil {
				lent[i].buf = make([]byte, 0, 64)
			}
		}
		return lent
	}
	giveBack := func(lent []scratch) {
		for _, sc := range lent {
			p.giveBack(sc.buf, sc.gz)
		}
	}
	for _, tc := range []struct {
		atOnce, wantKept int
	}{
		{atOnce: 5, wantKept: 2}, // the first cycle keeps the floor; its peak sizes the next
		{atOnce: 5, wantKept: 5},
		{atOnce: 1, wantKept: 5}, // kept for the cycle after the peak...
		{atOnce: 1, wantKept: 2}, // ...then back to the floor
	} {
		giveBack(borrow(tc.atOnce))
		if got := len(p.free); got != tc.wantKept {
			t.Fatalf("%d borrowed at once: %d spares kept, want %d", tc.atOnce, got, tc.wantKept)
		}
		p.endCycle()
		if p.out != 0 {
			t.Fatalf("%d still counted as borrowed", p.out)
		}
	}
}

// TestSparesFitTheBodies: a few nodes answering a little over a size class must not, over many cycles, move every
// spare up to it. Lent in turn, each spare met one of them sooner or later and kept its size, so 4 such nodes of 40
// grew all 10 spares to 128 KiB over the two hours of BENCHMARKS.md's "Two hours at 48fa82f"; lent by the node's
// previous body, the large spares number the large bodies read at once.
func TestSparesFitTheBodies(t *testing.T) {
	const small, large, atOnce, cycles = 40_000, 70_000, 10, 200
	sizes := make([]int, 40)
	for i := range sizes {
		sizes[i] = small
		if i%10 == 0 {
			sizes[i] = large
		}
	}
	bodies := map[int][]byte{small: bytes.Repeat([]byte("s"), small), large: bytes.Repeat([]byte("l"), large)}
	p := newBuffers(atOnce)
	previous := make([]int, len(sizes)) // each node's previous body, as nodeState.body
	rnd := rand.New(rand.NewPCG(1, 2))
	for range cycles {
		order := rnd.Perm(len(sizes))
		for len(order) > 0 {
			wave := order[:min(atOnce, len(order))]
			order = order[len(wave):]
			lent := make([][]byte, len(wave))
			for i, n := range wave {
				buf, _ := p.lend(previous[n])
				var err error
				if lent[i], err = readCapped(bytes.NewReader(bodies[sizes[n]]), buf, 1<<20); err != nil {
					t.Fatal(err)
				}
				previous[n] = len(lent[i])
				p.parsed(len(lent[i]))
			}
			rnd.Shuffle(len(lent), func(i, j int) { lent[i], lent[j] = lent[j], lent[i] })
			for _, buf := range lent {
				p.giveBack(buf, nil)
			}
		}
		p.endCycle()
	}
	fitLarge, total := 0, 0
	for _, sc := range p.free {
		total += cap(sc.buf)
		if cap(sc.buf) >= large {
			fitLarge++
		}
	}
	// 4 large nodes: at most 4 large bodies read at once, however the cycles ran.
	if len(p.free) != atOnce || fitLarge > 4 {
		t.Fatalf("after %d cycles %d of %d spares hold a %d-byte body (%d bytes kept), want at most the 4 large nodes'",
			cycles, fitLarge, len(p.free), large, total)
	}
}
