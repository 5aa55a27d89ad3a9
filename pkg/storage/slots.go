package storage

// slots numbers the pods of storage so that a view can keep its pod entries in one pointer-free slice, indexed by
// slot: per view that is 32 bytes a pod and nothing for the garbage collector to scan, where a map of entries cost
// many times that and was scanned at every collection. The index from pod to slot is storage's only map of its
// pods, since a second one costs memory for every pod; views share it as slotIndex says: all of it while no pod
// comes or goes, and all but the changes since its base while pods do.
// BENCHMARKS.md, "Figures behind the comments" and "The slot index under churn", has what each cost.
type slots struct {
	pods []*pod  // by slot; nil when free
	free []int32 // free slots, reused before the slice grows
	// index maps every pod to its slot. Its base is never modified; once a view holds it (shared), own copies its
	// changes since base before a change.
	index  slotIndex
	shared bool
	// layout counts renumberings: views built before one place pods at other slots.
	layout uint64
}

func newSlots() slots { return slots{index: newSlotIndex(map[podKey]int32{})} }

// get returns the pod of key, or nil.
func (s *slots) get(key podKey) *pod {
	if i, ok := s.index.get(key); ok {
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
	s.index.put(key, p.slot)
}

// remove frees the slot of p, the pod of key.
func (s *slots) remove(key podKey, p *pod) {
	s.pods[p.slot] = nil
	s.free = append(s.free, p.slot)
	s.own()
	s.index.drop(key)
}

// own makes the index's changes storage's own to modify, copying them when a view holds them.
func (s *slots) own() {
	if s.shared {
		s.index, s.shared = s.index.copied(), false
	}
}

// indexOf returns the index for a view to hold, which is then never modified. When more than half the slots are
// free (a cluster that shrank), it renumbers the pods first so views stay dense; else it folds the index's changes
// into a new base when they are many (slotIndex.needsFold).
func (s *slots) indexOf() slotIndex {
	live := len(s.pods) - len(s.free)
	switch {
	case len(s.free) > 64 && len(s.free) > live:
		old := s.pods
		s.pods, s.free = make([]*pod, 0, live), s.free[:0]
		s.layout++
		base := make(map[podKey]int32, live)
		for k, i := range s.index.all() {
			p := old[i]
			p.slot = int32(len(s.pods))
			s.pods = append(s.pods, p)
			base[k] = p.slot
		}
		s.index = newSlotIndex(base)
	case s.index.needsFold():
		s.index = s.index.folded()
	}
	s.shared = true
	return s.index
}
