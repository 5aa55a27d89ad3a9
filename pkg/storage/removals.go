package storage

import (
	"sync"
	"time"
)

// Removals: DESIGN.md section 2 drops the series of a deleted node or pod (or one that stopped Running) at once,
// and what is served must follow: storage publishes a removal without waiting for the cycle's commit (a resolution
// later), and counts removals so that a reader that joined the informers' objects with a snapshot before one
// (the API's builds) knows it may list an object since gone. A burst of deletions (a namespace, a rollout) costs
// one publication: one made less than MinPublishInterval after the previous publication waits for the rest of it,
// so publications stay as rare as Cycle.Publish keeps them (generations keep growing across restarts).

// Removals counts the nodes and pods the newest view served whose series the informers' events dropped (deleted,
// no longer Running): the count grows before the publication that leaves them out. Objects nothing served are not
// counted, since no build can list them (a Job's pods that never got metrics must not make every list rebuild). A reader that
// joined the informers' objects with a snapshot (a build) when the count was lower may hold an object that is gone,
// though that snapshot's values are still its own; one made since may not. Lock-free.
func (s *Storage) Removals() uint64 { return s.removals.Load() }

// Removal names an object whose removal Removals counted: a pod, or a node (Namespace "").
type Removal struct{ Namespace, Name string }

// RemovedAfter returns the objects whose removals Removals counted after count, and the count they go to: a reader
// whose join was made when Removals was count holds none of them unless it lists one, so only readers that list a
// removed object need joining again. ok is false when storage no longer recalls them all (more than recentRemovals
// since count): the reader must assume it lists one. It takes a lock of its own, never storage's.
func (s *Storage) RemovedAfter(count uint64) (removed []Removal, upTo uint64, ok bool) {
	return s.removedLog.after(count)
}

// recentRemovals is how many of the latest removals storage recalls (RemovedAfter): a burst of more between a
// reader's join and its next use (a namespace deleted at once) makes it join again, as every removal did before.
const recentRemovals = 1024

// removalLog is the latest removals, each at its count; a ring allocated at the first.
type removalLog struct {
	mu    sync.Mutex
	ring  []Removal // the removal counted n is at (n-1) % recentRemovals
	count uint64    // removals logged: Removals' count once it has counted them
}

func (l *removalLog) add(r Removal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ring == nil {
		l.ring = make([]Removal, recentRemovals)
	}
	l.ring[l.count%recentRemovals] = r
	l.count++
}

func (l *removalLog) after(count uint64) ([]Removal, uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if count >= l.count {
		return nil, max(count, l.count), true
	}
	if l.count-count > recentRemovals {
		return nil, l.count, false
	}
	out := make([]Removal, 0, l.count-count)
	for n := count; n < l.count; n++ {
		out = append(out, l.ring[n%recentRemovals])
	}
	return out, l.count, true
}

// removed counts the removal r of an object the newest view serves (served), and publishes it: at once when
// MinPublishInterval has passed since the previous publication, else once it has (Options.AfterFunc), unless a
// publication comes first. Nothing is published before the first commit (nothing is served before it). Called
// with s.mu held.
func (s *Storage) removed(r Removal, served bool) {
	if !served || s.health.Cycles == 0 {
		// No build of the newest view lists it: counting it would make readers rebuild for nothing.
		return
	}
	s.countRemoval(r)
	if s.removalDue {
		return
	}
	now := s.clock.mono()
	wait := time.Duration(s.pubAt + int64(MinPublishInterval) - now)
	if wait <= 0 {
		s.publish(s.buildInterim(s.view.Load()), false, now)
		return
	}
	s.removalDue = true
	s.opts.AfterFunc(wait, s.publishRemovals)
}

// countRemoval logs and counts the removal r, for readers (Removals, RemovedAfter); the caller publishes it. Called
// with s.mu held.
func (s *Storage) countRemoval(r Removal) {
	s.removedLog.add(r) // before it is counted: a reader seeing the count finds it in the log
	s.removals.Add(1)
}

// publishRemovals publishes the removals that came within MinPublishInterval of a publication, unless a
// publication has carried them since.
func (s *Storage) publishRemovals() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removalDue {
		s.publish(s.buildInterim(s.view.Load()), false, s.clock.mono())
	}
}
