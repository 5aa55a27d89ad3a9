package scraper

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"github.com/klauspost/compress/gzip"
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
			lent[i] = p.lend(0)
			if lent[i].buf == nil {
				lent[i].buf = make([]byte, 0, 64)
			}
		}
		return lent
	}
	giveBack := func(lent []scratch) {
		for _, sc := range lent {
			p.giveBack(sc)
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
// previous body, the large spares number the large bodies read at once. Once the spares have settled, a scrape
// seldom grows a buffer: the spares of the large bodies that recur every cycle are not given up.
func TestSparesFitTheBodies(t *testing.T) {
	const small, large, atOnce = 40_000, 70_000, 10
	sizes := make([]int, 40)
	for i := range sizes {
		sizes[i] = small
		if i%10 == 0 {
			sizes[i] = large
		}
	}
	r := newBodyReader(t, atOnce, len(sizes))
	r.cycles(100, atOnce, sizes)
	settled := r.grown
	r.cycles(100, atOnce, sizes)
	fitLarge, total := r.spares(large)
	// 4 large nodes: at most 4 large bodies read at once, however the cycles ran.
	if len(r.p.free) != atOnce || fitLarge > 4 {
		t.Fatalf("after 200 cycles %d of %d spares hold a %d-byte body (%d bytes kept), want at most the 4 large nodes'",
			fitLarge, len(r.p.free), large, total)
	}
	// A buffer given up after a quiet spell may be grown again: a few in 100 cycles of 40 scrapes, not one a cycle.
	if grown := r.grown - settled; grown > 10 {
		t.Fatalf("%d buffers grown in the 100 cycles after the spares settled, want at most 10", grown)
	}
}

// TestLargeSparesFollowRecentBursts: a burst of large bodies read at once must not size the spares for good. With
// fewer bodies read at once than the floor (--kubelet-concurrency), as usual, the spares beyond them are seldom lent,
// and the largest are lent last: trimmed smallest first and never aged, the 8 spares a burst of 8 large bodies grew
// were all still held 40 cycles later.
func TestLargeSparesFollowRecentBursts(t *testing.T) {
	const small, large, floor, atOnce = 40_000, 200_000, 10, 9
	r := newBodyReader(t, floor, 40)
	burst := make([]int, 40)
	for i := range burst {
		burst[i] = small
		if i < 8 {
			burst[i] = large
		}
	}
	r.wave(burst[:8]) // the 8 large nodes at once
	r.p.endCycle()
	if fitLarge, _ := r.spares(large); fitLarge != 8 {
		t.Fatalf("after the burst %d spares hold a large body, want 8", fitLarge)
	}
	quiet := slices.Repeat([]int{small}, 40) // the large nodes' pods moved away
	r.cycles(40, atOnce, quiet)
	if fitLarge, total := r.spares(large); fitLarge > 0 {
		t.Fatalf("%d cycles after the burst %d of %d spares still hold a %d-byte body (%d bytes kept), want none",
			40, fitLarge, len(r.p.free), large, total)
	}
	// The spares stay, and so do their gzip readers: only the buffers of a size no longer read go.
	if len(r.p.free) < atOnce {
		t.Fatalf("%d spares kept, want at least the %d bodies read at once", len(r.p.free), atOnce)
	}
	if r.gzipMade > floor {
		t.Fatalf("%d gzip readers made, want at most the %d spares': a spare's reader stays when its buffer goes", r.gzipMade, floor)
	}
}

// TestSparesOfOneSizeLentByUse: of spares of one size, the one needed most recently is lent first, so that the
// spares beyond the bodies read at once go unneeded and give up their buffers. Lent in turn, each was needed now
// and then and all 10 buffers of a cycle of 10 at once stayed through 40 cycles of 3.
func TestSparesOfOneSizeLentByUse(t *testing.T) {
	const size, floor = 40_000, 10
	sizes := slices.Repeat([]int{size}, floor)
	r := newBodyReader(t, floor, floor)
	r.wave(sizes)
	r.p.endCycle()
	r.cycles(40, 3, sizes)
	if held, total := r.spares(size); held > 3 {
		t.Fatalf("40 cycles of 3 bodies at once: %d of %d spares still hold a buffer (%d bytes kept), want at most 3",
			held, len(r.p.free), total)
	}
}

// bodyReader reads bodies through buffers as the Scraper's workers do: lent by each node's previous body, given
// back in any order, endCycle after each cycle.
type bodyReader struct {
	t        *testing.T
	p        *buffers
	previous []int // each node's previous body, as nodeState.body
	rnd      *rand.Rand
	bodies   map[int][]byte
	grown    int // reads whose lent buffer could not hold the body
	gzipMade int // reads lent no gzip reader, which made one
}

func newBodyReader(t *testing.T, floor, nodes int) *bodyReader {
	return &bodyReader{t: t, p: newBuffers(floor), previous: make([]int, nodes), rnd: rand.New(rand.NewPCG(1, 2)),
		bodies: map[int][]byte{}}
}

// cycles reads every node's body (sizes[n] bytes) n times, atOnce at a time, in a random order each cycle.
func (r *bodyReader) cycles(n, atOnce int, sizes []int) {
	for range n {
		order := r.rnd.Perm(len(sizes))
		for len(order) > 0 {
			wave := order[:min(atOnce, len(order))]
			order = order[len(wave):]
			r.read(wave, sizes)
		}
		r.p.endCycle()
	}
}

// wave reads the nodes 0..len(sizes)-1 at once.
func (r *bodyReader) wave(sizes []int) {
	nodes := make([]int, len(sizes))
	for i := range nodes {
		nodes[i] = i
	}
	r.read(nodes, sizes)
}

// read lends a buffer for each node, reads its body, then gives them all back in a random order.
func (r *bodyReader) read(nodes, sizes []int) {
	lent := make([]scratch, len(nodes))
	for i, n := range nodes {
		size := sizes[n]
		if r.bodies[size] == nil {
			r.bodies[size] = bytes.Repeat([]byte("b"), size)
		}
		lent[i] = r.p.lend(r.previous[n])
		if lent[i].gz == nil { // as a worker's first gzip response makes one
			lent[i].gz = new(gzip.Reader)
			r.gzipMade++
		}
		if cap(lent[i].buf) < size+2 {
			r.grown++
		}
		var err error
		if lent[i].buf, err = readCapped(bytes.NewReader(r.bodies[size]), lent[i].buf, 1<<20); err != nil {
			r.t.Fatal(err)
		}
		r.previous[n] = len(lent[i].buf)
		r.p.parsed(len(lent[i].buf))
	}
	r.rnd.Shuffle(len(lent), func(i, j int) { lent[i], lent[j] = lent[j], lent[i] })
	for _, sc := range lent {
		r.p.giveBack(sc)
	}
}

// spares counts the spares that hold a body of size bytes, and the bytes the spares keep.
func (r *bodyReader) spares(size int) (fit, total int) {
	for _, sc := range r.p.free {
		total += cap(sc.buf)
		if cap(sc.buf) >= size+2 {
			fit++
		}
	}
	return fit, total
}
