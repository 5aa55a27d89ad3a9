package storage

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"
)

// view is an immutable snapshot of what is servable, published at the end of each cycle. Readers load it with one
// atomic pointer read; staleness is checked at read time, because time passes between cycles.
type view struct {
	nodes map[string]nodeEntry
	// index maps a pod to its slot, and pods holds the slots' entries (layers.go). Every servable pod's containers
	// are a run of names and of usages (runs). usages has no pointers, so the garbage collector does not scan it; a
	// full layer's names are the previous full layer's when equal (runs.add), so that retained views keep one
	// copy of the names between them.
	index      slotIndex
	pods       *podLayer
	health     Health
	layout     uint64 // slots.layout when built: an interim build reuses the entries of a view of the same layout
	generation uint64
	committed  bool          // published by a cycle's Commit, not while the cycle ran (Cycle.Publish)
	holds      atomic.Int32  // the Handles held on it (snapshot.go), or dropped once let go
	own        atomic.Bool   // retained on storage's own account, whoever holds it (Retained)
	published  int64         // when its publication began (mono): a view held longer than staleAfter is not read
	changed    chan struct{} // closed when the next view is published
	// clock and staleAfter are copies of storage's, so a view answers alone: which entries are stale is decided at
	// read time, because time passes between cycles, and so is the 503 of DESIGN.md section 3.
	clock      monoClock
	staleAfter time.Duration
}

// monoClock is storage's clock: Now, and the reading at New that times kept for staleness count from (see mono).
type monoClock struct {
	now  func() time.Time
	base time.Time
}

// mono is the time on the clock as nanoseconds since base: with time.Now's monotonic readings, a step of the wall
// clock does not make series stale or fresh.
func (c monoClock) mono() int64 { return c.now().Sub(c.base).Nanoseconds() }

type nodeEntry struct {
	NodePoint
	staleAt int64 // when the entry turns stale, on the clock's mono
}

// podEntry is a pod's servable point, without pointers: times are Unix nanoseconds (staleAt on the clock's mono) and
// the containers are names[from:from+n] and usages[from:from+n] of its layer. n is 0 when the pod is not servable.
type podEntry struct {
	ts, staleAt int64
	window      time.Duration
	uid         uint64 // the pod object the samples were measured for (pod.object; PodPoint.UID)
	from, n     uint32
}

// prune drops stale series, containers missing from their pod's newest report and stale batch marks, and returns
// how many pods have series left. These are rules of the data; which objects exist is the informers' to say
// (PodBound, PodDeleted, NodeDeleted), so a stale pod keeps its binding. now is on storage's clock (mono). Called
// with s.mu held.
func (s *Storage) prune(now int64) (pods int) {
	stale := int64(s.opts.StaleAfter)
	for name, sr := range s.nodes {
		if now-sr.seen > stale {
			seriesPruned.WithLabelValues("stale").Inc()
			delete(s.nodes, name)
		}
	}
	for _, p := range s.slots.pods {
		switch {
		case p == nil:
		case len(p.containers) == 0: // bound, no samples yet
		case now-p.newestSeen() <= stale:
			// A container missing from its pod's newest report is gone (an init container that completed, a
			// container removed by a restart of the pod sandbox).
			p.containers = slices.DeleteFunc(p.containers, func(c container) bool { return c.batch != p.batch })
			pods++
		default: // the pod still exists: keep its binding, forget its samples
			seriesPruned.WithLabelValues("stale").Add(float64(len(p.containers)))
			p.containers = nil
		}
	}
	// A batch key's mark (its previous batch) goes when the key has sent nothing for StaleAfter, whatever the key
	// names: containers of a key heard from again after that are not counted as new since its previous batch.
	for key, m := range s.lastBatch {
		if now-m.seen > stale {
			delete(s.lastBatch, key)
		}
	}
	return pods
}

func (p *pod) newestSeen() int64 {
	var seen int64
	for _, c := range p.containers {
		seen = max(seen, c.seen)
	}
	return seen
}

// runs holds the containers of a view's pods, each pod's a run: names[i] and usages[i] are one container's.
type runs struct {
	names  []string
	usages []Usage
	// While a full layer is built, names is a prefix of shared, the previous full layer's names, for as long as
	// the names added are the same strings (in a steady cluster, to the end), and a slice of its own from the first
	// that is not (owned): so a build neither copies nor keeps a scratch of every container's name to find that
	// they did not change. shared is nil once built.
	shared []string
	owned  bool
}

func (r *runs) len() int { return len(r.usages) }

func (r *runs) truncate(n int) { r.names, r.usages = r.names[:n], r.usages[:n] }

func (r *runs) add(name string, u Usage) {
	r.usages = append(r.usages, u)
	n := len(r.names)
	if !r.owned {
		if n < len(r.shared) && sameString(r.shared[n], name) {
			r.names = r.shared[: n+1 : n+1] // never appended to: the next name not the same makes a copy
			return
		}
		r.names, r.owned = append(make([]string, 0, max(cap(r.usages), n+1)), r.names...), true
	}
	r.names = append(r.names, name)
}

// sameString reports whether a and b are one string in memory, not merely equal. A source's container name is
// part of one allocation with its namespace and pod (the kubelet parser's), and a pod replaced in its place by
// another of its Deployment has containers of the same names: a name shared for being equal kept the replaced
// pod's allocation alive through every later layer, one a container replaced, until every place held one.
func sameString(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b))
}

// buildView computes every servable point, its pods a full layer; publish sets its generation. Called with s.mu
// held. A build allocates a constant number of objects, not one per pod: the entries and the usages are two slices,
// and the names a third only when they are not the previous full layer's (runs.add).
func (s *Storage) buildView() *view {
	v := s.newView(s.slots.indexOf())
	now := v.clock.now()
	v.nodes = make(map[string]nodeEntry, len(s.nodes))
	for name, sr := range s.nodes {
		if e, ok := s.nodeEntry(sr, now); ok {
			v.nodes[name] = e
		}
	}
	total := 0
	for _, p := range s.slots.pods {
		if p != nil {
			total += len(p.containers)
		}
	}
	l := &podLayer{entries: make([]podEntry, len(s.slots.pods))}
	l.usages = make([]Usage, 0, total)
	if prev := s.view.Load().pods; prev != nil {
		l.shared = prev.full().names
	}
	for slot, p := range s.slots.pods {
		if p == nil {
			continue
		}
		if e, ok := s.appendPod(p, &l.runs); ok {
			l.entries[slot] = e
		}
	}
	l.names, l.shared = slices.Clip(l.names), nil
	v.pods = l
	return v
}

// newView returns a view of the current health, pods numbered as index says, with no entries yet.
func (s *Storage) newView(index slotIndex) *view {
	return &view{
		index:      index,
		layout:     s.slots.layout,
		health:     s.health,
		clock:      s.clock,
		staleAfter: s.opts.StaleAfter,
	}
}

// nodeEntry is what a view serves of a node's series, if anything; now is for the freshness histogram.
func (s *Storage) nodeEntry(sr *series, now time.Time) (nodeEntry, bool) {
	u, ts, win, ok := sr.usage(s.opts.Window, s.opts.Resolution, s.opts.StaleAfter)
	if !ok {
		return nodeEntry{}, false
	}
	if sr.batch > s.pubBatches { // observed when first published, not again at each publication
		freshness.Observe(now.Sub(time.Unix(0, ts)).Seconds())
	}
	return nodeEntry{NodePoint{time.Unix(0, ts), win, u}, sr.seen + int64(s.opts.StaleAfter)}, true
}

// appendPod appends the pod's containers' points to r and returns its entry, when every container is servable (or
// the pod is not: then r is as it was).
func (s *Storage) appendPod(p *pod, r *runs) (podEntry, bool) {
	w, res, stale := s.opts.Window, s.opts.Resolution, s.opts.StaleAfter
	from := r.len()
	e := podEntry{from: uint32(from), uid: p.object}
	if len(p.containers) == 0 || p.implausible {
		return podEntry{}, false
	}
	for _, c := range p.containers { // sorted by name, as served
		u, ts, win, ok := c.usage(w, res, stale)
		if !ok {
			r.truncate(from) // every container must be servable, or the pod is not
			return podEntry{}, false
		}
		r.add(c.name, u)
		if ts > e.ts {
			e.ts, e.window = ts, win
		}
		e.staleAt = max(e.staleAt, c.seen+int64(stale))
	}
	e.n = uint32(r.len() - from)
	return e, true
}

// Unavailable implements Snapshot.
func (v *view) Unavailable() error {
	h := v.health
	now := v.clock.now()
	if !h.LastSuccess.IsZero() && now.Sub(h.LastSuccess) <= v.staleAfter {
		return nil
	}
	last := h.LastError
	if last == nil {
		last = errors.New("no error reported")
	}
	switch {
	case h.Cycles == 0:
		return fmt.Errorf("metrics not available yet: the %s source has not finished its first collection", h.Source)
	case h.LastSuccess.IsZero():
		return fmt.Errorf("no successful collection from the %s source yet: %w", h.Source, last)
	case now.Sub(h.LastCycle) > v.staleAfter:
		return fmt.Errorf("the %s source's collection has stalled: last cycle finished %s ago", h.Source,
			now.Sub(h.LastCycle).Round(time.Second))
	default:
		return fmt.Errorf("no successful collection from the %s source for %s: %w", h.Source,
			now.Sub(h.LastSuccess).Round(time.Second), last)
	}
}
