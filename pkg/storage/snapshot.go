package storage

import (
	"slices"
	"time"
)

// RetainedViews is how many of the newest views storage keeps, so a watch can resume (and a list be paged) from a
// resourceVersion that is up to RetainedViews-1 publications old (older is 410 Gone); the views of the newest
// RetainedViews commits are kept too, so that interim publications (Cycle.Publish) never shorten that span below
// RetainedViews-1 collections. Each view costs about one servable point per object: 4 views when cycles are
// shorter than MinPublishInterval, at most 8 when they are longer.
const RetainedViews = 4

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
	if !ok || int(i) >= len(v.pods) {
		return PodPoint{}, false
	}
	e := &v.pods[i]
	if e.n == 0 || v.clock.mono() > e.staleAt {
		return PodPoint{}, false
	}
	end := e.from + e.n
	return PodPoint{Timestamp: time.Unix(0, e.ts), Window: e.window, Names: v.names[e.from:end:end],
		Usages: v.usages[e.from:end:end]}, true
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
			if int(i) < len(v.pods) && v.pods[i].n > 0 {
				pod(k.namespace, k.name)
			}
		}
	}
}

// Latest returns the newest snapshot.
func (s *Storage) Latest() Snapshot { return s.view.Load() }

// Committed returns the newest snapshot a cycle's Commit published. It is retained for RetainedViews commits,
// however many interim publications come meanwhile (Latest's may go after RetainedViews publications, a few seconds
// at 10,000 nodes), so a list paged with limit and continue starts from it: its continue tokens then stay valid for
// RetainedViews cycles.
func (s *Storage) Committed() Snapshot { return s.committed.Load() }

// At returns the snapshot of a recent generation; ok is false when it is no longer retained (or not yet published).
func (s *Storage) At(generation uint64) (Snapshot, bool) {
	for _, v := range *s.recent.Load() {
		if v.Generation() == generation {
			return v, true
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

// retain returns the views to keep once v is published: the RetainedViews newest, and the views of the
// RetainedViews newest commits.
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
		if views <= RetainedViews || (w.committed && commits <= RetainedViews) {
			kept = append(kept, w)
		}
	}
	slices.Reverse(kept)
	return &kept
}
