package storage

import (
	"slices"
	"sync/atomic"
	"time"
)

// RetainedViews is how many of the newest views storage keeps whether or not anyone holds them, so a watch can
// resume from a resourceVersion up to RetainedViews-1 publications old. Beyond those and the newest commit, a view
// is kept exactly while a reader holds a Handle on it (a page-through's lease, a watch feed), however many
// publications come meanwhile; once released, the next publication lets it go (Resolve no longer finds it: 410
// Gone, or a continue token continues from the newest commit). Holding by use instead of keeping every commit: a full
// snapshot is large in a large cluster (BENCHMARKS.md, "Figures behind the comments"), and pagers are rare.
const RetainedViews = 4

// dropped is a view's holds once retain let it go: it can no longer be held.
const dropped = -1

// Handle keeps one snapshot retained (Resolve finds it by its generation) for as long as it is held. Release it once
// the reader is done; a nil Handle (a snapshot that could not be held) releases nothing.
type Handle struct {
	v        *view
	released atomic.Bool
}

// Hold returns a handle on snap, one of this storage's snapshots; false when it was let go already (a newer
// publication came first), or is not this storage's. Lock-free: one compare-and-swap.
func (s *Storage) Hold(snap Snapshot) (*Handle, bool) {
	v, ok := snap.(*view)
	if !ok {
		return nil, false
	}
	for {
		n := v.holds.Load()
		if n == dropped {
			return nil, false
		}
		if v.holds.CompareAndSwap(n, n+1) {
			return &Handle{v: v}, true
		}
	}
}

// Release lets go of the snapshot: the next publication drops it unless it is among the newest or held by another.
// Releasing twice, or a nil Handle, does nothing.
func (h *Handle) Release() {
	if h != nil && h.released.CompareAndSwap(false, true) {
		h.v.holds.Add(-1)
	}
}

// Snapshot is what was servable at one publication (the end of a collection cycle, or a cycle in progress: see
// Cycle.Publish), and the source's health as of the newest commit. Reading several
// objects from one Snapshot gives answers consistent with each other and with its health, whatever cycles finish
// meanwhile. A Snapshot needs nothing else: it carries its own copy of storage's clock and --stale-after, so that
// staleness and the 503 are judged at read time.
type Snapshot interface {
	Node(name string) (NodePoint, bool)
	// Pod returns the pod's point; its Names and Usages are the snapshot's: callers must not modify them.
	Pod(namespace, name string) (PodPoint, bool)
	// Generation grows by one with each publication, from a start that grows across restarts: the
	// resourceVersion.
	Generation() uint64
	// Changed is closed when a newer snapshot is published.
	Changed() <-chan struct{}
	// Retained is whether storage keeps the snapshot on its own account, whoever holds it: it is among the
	// RetainedViews newest publications or is the newest commit. Once false it stays false, and the snapshot is
	// kept only while held (Hold): what a reader keeps of it beyond that point keeps it alive.
	Retained() bool
	// Each calls node with every node and pod with every pod the snapshot holds, stale or not; either may be nil.
	Each(node func(name string), pod func(namespace, name string))
	// Health is the source's collection health as of the newest commit before (or at) the snapshot.
	Health() Health
	// Unavailable returns the reason to answer 503 ServiceUnavailable, or nil: no cycle had succeeded within
	// StaleAfter (or none had finished yet), judged now. The error names the source and its last error.
	Unavailable() error
}

// Node implements Snapshot.
func (v *view) Node(name string) (NodePoint, bool) {
	e, ok := v.nodes[name]
	if !ok || v.clock.mono() > e.staleAt {
		return NodePoint{}, false
	}
	return e.NodePoint, true
}

// Pod implements Snapshot.
func (v *view) Pod(namespace, name string) (PodPoint, bool) {
	i, ok := v.index.get(podKey{namespace, name})
	if !ok {
		return PodPoint{}, false
	}
	e, r, ok := v.pods.entry(i)
	if !ok || e.n == 0 || v.clock.mono() > e.staleAt {
		return PodPoint{}, false
	}
	end := e.from + e.n
	return PodPoint{Timestamp: time.Unix(0, e.ts), Window: e.window, Names: r.names[e.from:end:end],
		Usages: r.usages[e.from:end:end], UID: e.uid}, true
}

// Generation implements Snapshot.
func (v *view) Generation() uint64 { return v.generation }

// Health implements Snapshot.
func (v *view) Health() Health { return v.health }

// Changed implements Snapshot.
func (v *view) Changed() <-chan struct{} { return v.changed }

// Retained implements Snapshot.
func (v *view) Retained() bool { return v.own.Load() }

// Each implements Snapshot.
func (v *view) Each(node func(name string), pod func(namespace, name string)) {
	if node != nil {
		for name := range v.nodes {
			node(name)
		}
	}
	if pod != nil {
		for k, i := range v.index.all() {
			if e, _, ok := v.pods.entry(i); ok && e.n > 0 {
				pod(k.namespace, k.name)
			}
		}
	}
}

// Latest returns the newest snapshot.
func (s *Storage) Latest() Snapshot { return s.view.Load() }

// Committed returns the newest snapshot a cycle's Commit published: a whole collection, which a list paged with
// limit and continue starts from (its reader holds it while it pages, Hold).
func (s *Storage) Committed() Snapshot { return s.committed.Load() }

// Resolve returns the snapshot a generation names (a client's resourceVersion, a continue token's) while storage
// keeps it: Retained, or held; ok is false when it is not (or not yet published). One released is not found from
// then on, though the next publication removes it: a snapshot read long after its time would have every value
// stale. For the same reason one only held is not found once published longer than StaleAfter ago: a page-through
// renewing its hold then continues from the newest commit, rather than serving values older than --stale-after, or
// none.
func (s *Storage) Resolve(generation uint64) (Snapshot, bool) {
	for _, v := range *s.recent.Load() {
		if v.Generation() == generation {
			held := v.holds.Load() > 0 && v.clock.mono()-v.published <= int64(v.staleAfter)
			return v, v.own.Load() || held
		}
	}
	return nil, false
}

// publish makes v the newest view and wakes whoever waits on the previous one; committed says whether a cycle's
// Commit published it, began when its publication began (mono). Called with s.mu held.
func (s *Storage) publish(v *view, committed bool, began int64) {
	s.published++
	v.generation, v.committed, v.changed = s.epoch+s.published, committed, make(chan struct{})
	v.published = began
	v.own.Store(true)
	s.pubBatches, s.pubAt = s.batches, began
	s.removalDue = false // this publication carries them
	s.dirty.reset()
	prev := s.view.Swap(v)
	s.recent.Store(retain(*s.recent.Load(), v))
	if committed {
		s.committed.Store(v)
	}
	close(prev.changed)
}

// retain returns the views to keep once v is published: the RetainedViews newest and the newest commit (own), and
// those a reader holds; the others are marked dropped, so none can be held once let go.
func retain(recent []*view, v *view) *[]*view {
	all := append(recent[:len(recent):len(recent)], v)
	kept := make([]*view, 0, min(len(all), 2*RetainedViews))
	views, commits := 0, 0
	for i := len(all) - 1; i >= 0; i-- {
		w := all[i]
		views++
		if w.committed {
			commits++
		}
		own := views <= RetainedViews || (w.committed && commits == 1)
		w.own.Store(own)
		switch {
		case own:
			kept = append(kept, w)
		case !w.holds.CompareAndSwap(0, dropped):
			kept = append(kept, w) // held
		}
	}
	slices.Reverse(kept)
	return &kept
}
