package scraper

import (
	"testing"
	"time"
)

// TestConnectionAgeDraw: a connection is closed by the first scrape at or past a point between three quarters of
// the maximum age and all of it, drawn at the scrape after the previous close; every such point is used, so the
// handshakes of nodes that started together spread over that quarter.
func TestConnectionAgeDraw(t *testing.T) {
	const maxAge, every = 10 * time.Minute, 15 * time.Second
	start := time.Now()
	var st nodeState
	var ages []time.Duration
	born := start
	for now := start; now.Before(start.Add(1000 * maxAge)); now = now.Add(every) {
		if st.closeConn(now, maxAge) {
			st.closed() // the closing scrape got its response
			// The next scrape dials: the connection lived from the draw's scrape to this one's end.
			ages = append(ages, now.Sub(born))
			born = now.Add(every)
		}
	}
	if len(ages) < 900 {
		t.Fatalf("%d closes in 1,000 maximum ages, want about 1,100", len(ages))
	}
	lo, hi := maxAge, time.Duration(0)
	for _, a := range ages {
		lo, hi = min(lo, a), max(hi, a)
	}
	// The scrape's cadence rounds the drawn point up to the next scrape: at most one resolution past it.
	if lo < maxAge*3/4 || hi > maxAge+every {
		t.Errorf("connections lived %v to %v, want within %v to %v", lo, hi, maxAge*3/4, maxAge+every)
	}
	if hi-lo < maxAge/8 {
		t.Errorf("connections lived %v to %v: the points are not spread over the last quarter", lo, hi)
	}
	if st := (nodeState{}); st.closeConn(start, 0) || st.closeConn(start.Add(1000*maxAge), 0) {
		t.Error("a maximum age of 0 closed a connection")
	}
}

// TestConnectionCloseOutlivesAFailedScrape: a scrape that was to close the connection but got no response (its
// deadline passed before it was sent, or the kubelet failed) leaves the close to the next scrape, rather than
// giving the old connection another full age.
func TestConnectionCloseOutlivesAFailedScrape(t *testing.T) {
	const maxAge = time.Minute
	start := time.Now()
	var st nodeState
	if st.closeConn(start, maxAge) {
		t.Fatal("the first scrape closed the connection")
	}
	late := start.Add(maxAge)
	if !st.closeConn(late, maxAge) {
		t.Fatal("a scrape past the maximum age kept the connection")
	}
	// That scrape failed: closed is not called.
	if !st.closeConn(late.Add(15*time.Second), maxAge) {
		t.Fatal("after a failed closing scrape, the next kept the connection")
	}
	st.closed()
	if st.closeConn(late.Add(30*time.Second), maxAge) {
		t.Error("the scrape after a close closed the new connection at once")
	}
}
