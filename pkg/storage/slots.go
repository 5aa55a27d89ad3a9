package storage

import "maps"

// slots numbers the pods of storage so that a view can keep its pod entries in one pointer-free slice, indexed by
// slot: per view that is 32 bytes a pod and nothing for the garbage collector to scan, where a map of entries cost
// many times that and was scanned at every collection. The index from pod to slot is storage's only map of its
// pods, since a second one costs memory for every pod, and every view published while the set of pods does not
// change shares it, which in a steady cluster is most of them: a change after a publication copies it first (own).
// BENCHMARKS.md, "Figures behind the comments", has what each cost.
type slots struct {
	pods []*pod  // by slot; nil when free
	free []int32 // free slots, reused before the slice grows
	// index maps every pod to its slot. Once a view holds it (shared), it is never modified: own copies it.
	index  map[podKey]int32
	shared bool
	// layout counts renumberings: views built before one place pods at other slots.
	layout uint64
}

func newSlots() slots { return slots{index: map[podKey]int32{}} }

// get returns the pod of key, or nil.
func (s *slots) get(key podKey) *pod {
	if i, ok := s.index[key]; ok {
		return s.pods[i]
	}
	return nil
}

// add gives p, the pod of key, a slot.
func (s *slots) add(key podKey, p *pod) {
	if n := len(s.free); n > 0 {
		p.slot = s.free[n-1]
		s.free = s.free[:n-1]
		s.pods[p.slot] = p
	} else {
		p.slot = int32(len(s.pods))
		s.pods = append(s.pods, p)
	}
	s.own()
	s.index[key] = p.slot
}

// remove frees the slot of p, the pod of key.
func (s *slots) remove(key podKey, p *pod) {
	s.pods[p.slot] = nil
	s.free = append(s.free, p.slot)
	s.own()
	delete(s.index, key)
}

// own makes the index storage's own to modify, copying it when a view holds it.
func (s *slots) own() {
	if s.shared {
		s.index, s.shared = maps.Clone(s.index), false
	}
}

// indexOf returns the index for a view to hold, which is then never modified. When more than half the slots are
// free (a cluster that shrank), it renumbers the pods first so views stay dense.
func (s *slots) indexOf() map[podKey]int32 {
	if len(s.free) > 64 && len(s.free) > len(s.index) {
		old := s.pods
		s.pods, s.free = make([]*pod, 0, len(s.index)), s.free[:0]
		s.layout++
		index := make(map[podKey]int32, len(s.index))
		for k, i := range s.index {
			p := old[i]
			p.slot = int32(len(s.pods))
			s.pods = append(s.pods, p)
			index[k] = p.slot
		}
		s.index = index
	}
	s.shared = true
	return s.index
}
