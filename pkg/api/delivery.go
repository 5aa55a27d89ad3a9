package api

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// delivery is what every watcher of one selection is sent for one collection: the events between two builds,
// computed once (not storage's Batch, which is a source's samples). A delivery is never modified once made.
type delivery struct {
	rv     string
	gen    uint64 // rv as a number
	cycle  uint64 // the collection cycles committed at its snapshot: a watcher's lag is counted in cycles
	events []watch.Event
	// end, when set, ends every watcher with this ERROR event's status (a source down for --stale-after, say).
	end *metav1.Status
	// drop, with end, ends the watchers at once: what they have queued is released, not sent first.
	drop bool
	// acct is what a feed's delivery is charged to while watchers have it queued; nil for a delivery of one watch.
	acct *deliveryAccount
}

// deliveryAccount charges a feed's delivery to the feed (keeper) from when it is published until the last watcher
// that queued it has sent it or let it go, with the encodings of its events as they are made meanwhile; an encoding
// made later (the handler encodes what a watcher sent) is the handler's, not the feed's.
type deliveryAccount struct {
	kp *keeper
	k  *kept

	mu    sync.Mutex
	bytes int64 // charged to k, refunded when the last reference goes
	refs  int   // the feed's, while it publishes, and each watcher's that queued the delivery
}

// add counts n bytes already admitted to the feed as the delivery's.
func (a *deliveryAccount) add(n int64) {
	a.mu.Lock()
	a.bytes += n
	a.mu.Unlock()
}

// charge charges an encoding of n bytes of one of the delivery's events, unless its last reference was released.
func (a *deliveryAccount) charge(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refs > 0 {
		a.bytes += int64(n)
		a.kp.charge(a.k, int64(n))
	}
}

// ref adds a reference: a watcher queued the delivery.
func (dv *delivery) ref() {
	if dv.acct != nil {
		dv.acct.mu.Lock()
		dv.acct.refs++
		dv.acct.mu.Unlock()
	}
}

// release drops a reference: the last one refunds what the delivery was charged.
func (dv *delivery) release() {
	if a := dv.acct; a != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.refs--; a.refs == 0 {
			a.kp.refund(a.k, a.bytes)
		}
	}
}
