package storage

// slots numbers the pods of storage so that a view can keep its pod entries in one pointer-free slice, indexed by
// slot: per view that is 32 bytes a pod and nothing for the garbage collector to scan, where a map of entries cost
// about 300 bytes a pod and was scanned at every collection. The index from pod to slot is shared by every view
// published while the set of pods does not change, which in a steady cluster is most of them.
type slots struct {
	pods []*pod  // by slot; nil when free
	free []int32 // free slots, reused before the slice grows
	// index maps every pod to its slot; nil when pods came or went since it was built. Views share it, so it is
	// never modified once built.
	index map[podKey]int32
	// layout counts renumberings: views built before one place pods at other slots.
	layout uint64
}

// add gives p a slot.
func (s *slots) add(p *pod) {
	if n := len(s.free); n > 0 {
		p.slot = s.free[n-1]
		s.free = s.free[:n-1]
		s.pods[p.slot] = p
	} else {
		p.slot = int32(len(s.pods))
		s.pods = append(s.pods, p)
	}
	s.index = nil
}

// remove frees p's slot.
func (s *slots) remove(p *pod) {
	s.pods[p.slot] = nil
	s.free = append(s.free, p.slot)
	s.index = nil
}

// indexOf returns the index of pods, the map the slots number, building it when pods came or went. When more
// than half the slots are free (a cluster that shrank), it renumbers the pods first so views stay dense.
func (s *slots) indexOf(pods map[podKey]*pod) map[podKey]int32 {
	if s.index != nil {
		return s.index
	}
	if len(s.free) > 64 && len(s.free) > len(pods) {
		s.pods, s.free = s.pods[:0], s.free[:0]
		s.layout++
		for _, p := range pods {
			p.slot = int32(len(s.pods))
			s.pods = append(s.pods, p)
		}
		clear(s.pods[len(s.pods):cap(s.pods)])
	}
	s.index = make(map[podKey]int32, len(pods))
	for k, p := range pods {
		s.index[k] = p.slot
	}
	return s.index
}
