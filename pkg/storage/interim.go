package storage

import "maps"

// An interim publication (Cycle.Publish) changes only what landed since the previous publication: a fraction of the
// nodes. Building the whole snapshot each time read every series' ring, one cache miss each, with storage's lock
// held, several times a cycle: a large part of the process' CPU in a large cluster (BENCHMARKS.md, "Figures behind
// the comments"). So storage notes what each batch and informer event touched (dirty), and an interim
// build copies the published view's flat slices and recomputes only that. A commit still builds in full, after
// pruning, which also compacts the runs that interim builds moved.

// dirty is what changed since the newest publication. Entries may repeat; rebuilding one twice is harmless.
type dirty struct {
	pods  []int32  // slots of pods reported, bound, rebound or dropped
	nodes []string // nodes reported or deleted
}

func (d *dirty) reset() {
	d.pods = d.pods[:0]
	clear(d.nodes) // the names are the batches' strings: do not keep them alive
	d.nodes = d.nodes[:0]
}

// buildInterim returns the view to publish during a cycle: the published view prev with what changed since it
// recomputed, its pods a patch over prev's (layers.go). It builds in full when the pods were renumbered since prev
// (slots.indexOf) or prev's patches are already maxPatches deep. Called with s.mu held.
func (s *Storage) buildInterim(prev *view) *view {
	index := s.slots.indexOf()
	if prev.layout != s.slots.layout || prev.pods == nil || prev.pods.depth >= maxPatches {
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
	v.pods = s.buildPatch(prev.pods)
	return v
}

// touchPod notes that the pod in slot changed since the newest publication. Called with s.mu held.
func (s *Storage) touchPod(slot int32) { s.dirty.pods = append(s.dirty.pods, slot) }

// touchNode notes that the node's series changed (or went) since the newest publication. Called with s.mu held.
func (s *Storage) touchNode(name string) { s.dirty.nodes = append(s.dirty.nodes, name) }
