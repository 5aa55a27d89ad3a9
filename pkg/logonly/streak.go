package logonly

// Change is how a Streak's state changed at a report.
type Change uint8

const (
	// Same: the state is what it was at the previous report; nothing to log.
	Same Change = iota
	// Began: a condition started (from the zero state).
	Began
	// Changed: the condition went on in another state (a query that warned now fails).
	Changed
	// Ended: the condition is over (back to the zero state).
	Ended
)

// Streak is the state of one condition of a source between its reports (a node's scrapes, a query's polls), the
// zero value when it does not hold, so that a source logs a condition when it begins, changes and ends, not at
// every report (DESIGN.md section 3: once per failure streak). Not safe for concurrent use.
type Streak[S comparable] struct{ state S }

// Set records the state at this report and says how it changed since the previous one.
func (s *Streak[S]) Set(now S) Change {
	var zero S
	prev := s.state
	s.state = now
	switch {
	case prev == now:
		return Same
	case prev == zero:
		return Began
	case now == zero:
		return Ended
	}
	return Changed
}
