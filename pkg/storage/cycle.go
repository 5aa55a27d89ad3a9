package storage

import "time"

// Cycle is one collection cycle in progress. The collection loop begins it (BeginCycle), hands its Append to the
// source, and commits the outcome the source reports (Commit): the source appends samples and never sees storage's
// health nor publication. Cycles do not overlap: the loop begins the next only after committing this one.
type Cycle struct{ s *Storage }

// Outcome is how a collection cycle went, for health (DESIGN.md section 3).
type Outcome struct {
	// Success: at least one node (kubelet) or every query (Prometheus) returned data, or there was nothing to
	// collect.
	Success bool
	// Err is the cycle's error, kept even on success (one node of many failed, a swap query failed).
	Err error
	// Listed and Reached are how many nodes the cycle was to collect and how many returned data; a source that
	// does not count nodes (Prometheus) leaves both 0.
	Listed, Reached int
}

// AppendFunc is a cycle's Append, as the loop hands it to a source: all a source knows of storage besides the types
// of a batch.
type AppendFunc func(*Batch) Rejection

// BeginCycle starts a collection cycle.
func (s *Storage) BeginCycle() *Cycle { return &Cycle{s: s} }

// Append adds one batch's samples to their series and reports those it rejected, so the source can log them with
// its own context (which node, which query). It is safe to call from many goroutines until Commit; the batch is
// only read during the call, so a source may reuse it.
func (c *Cycle) Append(b *Batch) Rejection { return c.s.store(b) }

// Publish makes what the cycle has appended so far servable, before the cycle ends, so that a sample does not wait
// for the slowest node of its cycle. It publishes only when batches arrived since the
// previous snapshot, at most once per MinPublishInterval, and never during the first cycle (nothing is served
// before it commits); the snapshot carries the health of the previous commit, since this cycle's outcome is not
// known yet. It prunes nothing: staleness is judged at Commit. The collection loop calls it on a ticker.
func (c *Cycle) Publish() { c.s.publishInterim() }

// Commit ends the cycle: storage records its outcome as the source's health, prunes stale series and publishes the
// new snapshot.
func (c *Cycle) Commit(o Outcome) { c.s.endCycle(o) }

// MinPublishInterval is the least time between a publication and an interim one (Cycle.Publish), less a tenth of
// slack for a ticker's jitter. It is storage's own invariant, not the cadence (pkg/collect owns that, and asks for
// interim publications every PublishEvery, at least this): whatever a caller asks, commits come at most once per
// resolution (at least a second) and interim publications at most once per 0.9 MinPublishInterval, so generations
// grow by about two a second at most, far slower than the epoch's milliseconds: they keep growing across restarts
// (see Storage.epoch). Each publication builds a snapshot (BenchmarkStoreCycle/publish; BENCHMARKS.md, "Figures
// behind the comments"), so this also bounds that cost to a few builds per cycle.
const MinPublishInterval = time.Second

// publishInterim publishes what the cycle in progress has appended (Cycle.Publish).
func (s *Storage) publishInterim() {
	now := s.clock.mono()
	s.mu.Lock()
	defer s.mu.Unlock()
	// A tenth of slack: a ticker's tick received a little later than the previous one would otherwise skip a
	// publication (pubAt is when the previous one began), halving the rate.
	if s.health.Cycles == 0 || s.batches == s.pubBatches || now-s.pubAt < int64(MinPublishInterval)*9/10 {
		return
	}
	s.publish(s.buildInterim(s.view.Load()), false, now)
}

// endCycle finishes a collection cycle (Cycle.Commit): it records its outcome, prunes stale series and publishes
// the new servable view.
func (s *Storage) endCycle(o Outcome) {
	now := s.opts.Now()
	mono := now.Sub(s.clock.base).Nanoseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.health.Cycles++
	s.health.LastCycle = now
	s.health.LastError = o.Err
	if o.Success {
		s.health.LastSuccess = now
	}
	pods := s.prune(mono)
	v := s.buildView()
	s.health.Listed, s.health.Reached, s.health.Servable = o.Listed, o.Reached, len(v.nodes)
	if s.health.Complete.IsZero() && o.Success && len(v.nodes) >= o.Listed {
		s.health.Complete = now
	}
	v.health = s.health
	s.publish(v, true, mono)
	seriesGauge.WithLabelValues("node").Set(float64(len(s.nodes)))
	seriesGauge.WithLabelValues("pod").Set(float64(pods))
}
