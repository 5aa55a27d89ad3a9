package storage

import "time"

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

// removed counts a removal of an object the newest view serves (served), and publishes it: at once when
// MinPublishInterval has passed since the previous publication, else once it has (Options.AfterFunc), unless a
// publication comes first. Nothing is published before the first commit (nothing is served before it). Called
// with s.mu held.
func (s *Storage) removed(served bool) {
	if !served || s.health.Cycles == 0 {
		// No build of the newest view lists it: counting it would make readers rebuild for nothing.
		return
	}
	s.removals.Add(1)
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

// publishRemovals publishes the removals that came within MinPublishInterval of a publication, unless a
// publication has carried them since.
func (s *Storage) publishRemovals() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removalDue {
		s.publish(s.buildInterim(s.view.Load()), false, s.clock.mono())
	}
}
