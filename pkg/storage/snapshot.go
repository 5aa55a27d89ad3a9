package storage

import (
	"slices"
	"time"
)

// RetainedViews is how many of the newest views storage keeps, so a watch can resume from a resourceVersion that is
// up to RetainedViews-1 publications old (older is 410 Gone). A committed view that a paged list or a resumed watch
// read (Committed, At) is kept too, for RetainedViews commits, so that a page-through whose build was let go can
// read the same collection again however many interim publications (Cycle.Publish) come meanwhile (after that its
// token continues from the newest commit); one nobody read goes once it is
// neither among the newest views nor the newest commit. Pinning by use instead of keeping every commit: a full
// snapshot is about 25 MB at 10,000 nodes x 30 pods, and pagers are rare.
const RetainedViews = 4

// A committed view's pin: whether a reader pinned it (Committed, At) or retain dropped it, whichever came first.
const (
	unpinned int32 = iota
	pinned
	dropped
)

// pin keeps v while it is among the RetainedViews newest commits; false when retain dropped it first.
func (v *view) pin() bool {
	return v.pinned.CompareAndSwap(unpinned, pinned) || v.pinned.Load() == pinned
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
	i, ok := v.index[podKey{namespace, name}]
	if !ok {
		return PodPoint{}, false
	}
	e, r, ok := v.pods.entry(i)
	if !ok || e.n == 0 || v.clock.mono() > e.staleAt {
		return PodPoint{}, false
	}
	end := e.from + e.n
	return PodPoint{Timestamp: time.Unix(0, e.ts), Window: e.window, Names: r.names[e.from:end:end],
		Usages: r.usages[e.from:end:end]}, true
}

// Generation implements Snapshot.
func (v *view) Generation() uint64 { return v.generation }

// Health implements Snapshot.
func (v *view) Health() Health { return v.health }

// Changed implements Snapshot.
func (v *view) Changed() <-chan struct{} { return v.changed }

// Each implements Snapshot.
func (v *view) Each(node func(name string), pod func(namespace, name string)) {
	if node != nil {
		for name := range v.nodes {
			node(name)
		}
	}
	if pod != nil {
		for k, i := range v.index {
			if e, _, ok := v.pods.entry(i); ok && e.n > 0 {
				pod(k.namespace, k.name)
			}
		}
	}
}

// Latest returns the newest snapshot.
func (s *Storage) Latest() Snapshot { return s.view.Load() }

// Committed returns the newest snapshot a cycle's Commit published, pinned: it is then retained for RetainedViews
// commits, however many interim publications come meanwhile (Latest's may go after RetainedViews publications, a
// few seconds at 10,000 nodes), so a list paged with limit and continue starts from it: its continue tokens then
// stay valid for RetainedViews cycles.
func (s *Storage) Committed() Snapshot {
	for {
		// The newest commit is never dropped; one that a newer commit displaced since the load may have been.
		if v := s.committed.Load(); v.pin() {
			return v
		}
	}
}

// At returns the snapshot of a recent generation; ok is false when it is no longer retained (or not yet published).
// A committed snapshot read here is pinned, like Committed's.
func (s *Storage) At(generation uint64) (Snapshot, bool) {
	for _, v := range *s.recent.Load() {
		if v.Generation() == generation {
			return v, !v.committed || v.pin()
		}
	}
	return nil, false
}

// publish makes v the newest view and wakes whoever waits on the previous one; committed says whether a cycle's
// Commit published it, began when its publication began (mono). Called with s.mu held.
func (s *Storage) publish(v *view, committed bool, began int64) {
	s.published++
	v.generation, v.committed, v.changed = s.epoch+s.published, committed, make(chan struct{})
	s.pubBatches, s.pubAt = s.batches, began
	s.dirty.reset()
	prev := s.view.Swap(v)
	s.recent.Store(retain(*s.recent.Load(), v))
	if committed {
		s.committed.Store(v)
	}
	close(prev.changed)
}

// retain returns the views to keep once v is published: the RetainedViews newest, the newest commit, and the
// commits among the RetainedViews newest that a reader pinned.
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
		switch {
		case views <= RetainedViews || (w.committed && commits == 1):
			kept = append(kept, w)
		case w.committed && commits <= RetainedViews && !w.pinned.CompareAndSwap(unpinned, dropped):
			kept = append(kept, w) // pinned
		}
	}
	slices.Reverse(kept)
	return &kept
}
