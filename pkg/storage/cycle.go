package storage

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

// Commit ends the cycle: storage records its outcome as the source's health, prunes stale series and publishes the
// new snapshot.
func (c *Cycle) Commit(o Outcome) { c.s.endCycle(o) }
