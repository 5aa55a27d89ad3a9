package scraper

import (
	"math/rand/v2"
	"time"
)

// A kept-alive kubelet connection is given up after about a maximum age (Options.ConnMaxAge): the node's first
// scrape past a point drawn between three quarters of that age and all of it asks for the connection to be closed
// after its response (Connection: close), and the next scrape dials afresh. Why:
//   - crypto/tls reads into a record buffer sized to what the socket held at the time and never shrinks it, so a
//     client that reads late on a busy machine keeps, connection by connection, buffers grown for one moment's
//     backlog (BENCHMARKS.md, "115 minutes at 6c74818"); a new connection starts small;
//   - a connection checked the kubelet's serving certificate once, at its handshake: its expiry or its rotation is
//     only ever seen by a new one.
//
// The draw spreads the handshakes out, where a restart would otherwise have every node re-dial at the same scrape.
// Plain HTTP (--deprecated-kubelet-completely-insecure) has neither, so its connections are kept (Options.complete).

// closeConn says whether the node's scrape starting at now is to be its connection's last: the connection's age
// has passed its drawn point. The node's first scrape, and the first after a close, draw the next point. It stays
// passed until closed says the closing request got an answer (an error status is one), so a scrape that failed
// before sending it leaves the close to the next, and a node that keeps answering errors is not re-dialled at
// every scrape. A connection the transport re-made on its own (the kubelet closed it, a scrape failed)
// is closed early; no harm. maxAge 0 keeps connections for as long as they live.
func (st *nodeState) closeConn(now time.Time, maxAge time.Duration) bool {
	if maxAge <= 0 {
		return false
	}
	if st.connDue.IsZero() {
		st.connDue = now.Add(maxAge - rand.N(maxAge/4+1))
		return false
	}
	return !now.Before(st.connDue)
}

// closed records that the request closeConn asked to close its connection got a response, and so is closed: the
// next scrape dials afresh and draws the new connection's point.
func (st *nodeState) closed() { st.connDue = time.Time{} }
