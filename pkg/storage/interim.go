package storage

import (
	"maps"
	"slices"
)

// An interim publication (Cycle.Publish) changes only what landed since the previous publication: about a fifth of
// the nodes when a 5 s cycle publishes every second. Building the whole snapshot each time read every series' ring,
// one cache miss each: at 10,000 nodes a build took about 130 ms, with storage's lock held, five times a cycle (a
// fifth of the process' CPU). So storage notes what each batch and informer event touched (dirty), and an interim
// build copies the published view's flat slices and recomputes only that. A commit still builds in full, after
// pruning, which also compacts the runs that interim builds moved.

// dirty is what changed since the newest publication. Entries may repeat; rebuilding one twice is harmless.
type dirty struct {
	pods  []int32  // slots of pods reported, bound, rebound or dropped
	nodes []string // nodes reported or deleted
	// scratch holds one pod's points while an interim build computes them.
	scratch runs
}

func (d *dirty) reset() {
	d.pods = d.pods[:0]
	clear(d.nodes) // the names are the batches' strings: do not keep them alive
	d.nodes = d.nodes[:0]
	clear(d.scratch.names)
	d.scratch.truncate(0)
}

// buildInterim returns the view to publish during a cycle: the published view prev with what changed since it
// recomputed. It builds in full when the pods were renumbered since prev (slots.indexOf). Called with s.mu held.
func (s *Storage) buildInterim(prev *view) *view {
	index := s.slots.indexOf(s.pods)
	if prev.layout != s.slots.layout || len(prev.pods) > len(s.slots.pods) {
		return s.buildView()
	}
	v := s.newView(index)
	v.nodes = maps.Clone(prev.nodes)
	if v.nodes == nil {
		v.nodes = map[string]nodeEntry{}
	}
	now := v.clock.now()
	for _, name := range s.dirty.nodes {
		sr := s.nodes[name]
		if sr == nil {
			delete(v.nodes, name)
			continue
		}
		if e, ok := s.nodeEntry(sr, now); ok {
			v.nodes[name] = e
		} else {
			delete(v.nodes, name)
		}
	}
	copy(v.pods, prev.pods)
	// The runs of pods whose container count changed move to the end; the rest are rewritten in place. The names
	// stay prev's, shared, until a pod's differ: then the view copies them before it writes (own).
	v.usages = slices.Clone(prev.usages)
	v.names = prev.names
	owned := false
	own := func() {
		if !owned {
			v.names, owned = slices.Clone(v.names), true
		}
	}
	sc := &s.dirty.scratch
	for _, slot := range s.dirty.pods {
		if int(slot) >= len(s.slots.pods) {
			continue
		}
		p := s.slots.pods[slot]
		if p == nil {
			v.pods[slot] = podEntry{}
			continue
		}
		// Built aside, then written over the pod's run when it has as many containers, else appended.
		sc.truncate(0)
		e, ok := s.appendPod(p, sc)
		if !ok {
			v.pods[slot] = podEntry{}
			continue
		}
		if old := v.pods[slot]; old.n == e.n && old.n > 0 {
			e.from = old.from
			copy(v.usages[e.from:e.from+e.n], sc.usages)
			if !slices.Equal(v.names[e.from:e.from+e.n], sc.names) {
				own()
				copy(v.names[e.from:e.from+e.n], sc.names)
			}
		} else {
			own()
			e.from = uint32(len(v.usages))
			v.usages, v.names = append(v.usages, sc.usages...), append(v.names, sc.names...)
		}
		v.pods[slot] = e
	}
	return v
}

// touchPod notes that the pod in slot changed since the newest publication. Called with s.mu held.
func (s *Storage) touchPod(slot int32) { s.dirty.pods = append(s.dirty.pods, slot) }

// touchNode notes that the node's series changed (or went) since the newest publication. Called with s.mu held.
func (s *Storage) touchNode(name string) { s.dirty.nodes = append(s.dirty.nodes, name) }
