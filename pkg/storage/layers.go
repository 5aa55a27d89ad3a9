package storage

import "math/bits"

// A view's pod entries are layers. A commit builds a full layer: every slot's entry, and every servable
// container's name and usage. An interim publication builds a patch over the published view's layers: the entries
// of the pods that changed since it, nothing else. Copying the whole snapshot instead made each interim publication
// cost a full one, every second (BENCHMARKS.md, "Figures behind the comments"), and the newest retained snapshots
// as many copies; a patch costs what landed since the previous publication plus a bit a pod. Reads walk the patches down to
// the full layer, so their number is bounded (maxPatches): past it, an interim publication builds in full.

// maxPatches bounds the patches a read may walk before it reaches a full layer. At one publication a second and the
// default 15 s resolution, a cycle's interim publications stay below it and the commit builds in full.
const maxPatches = 16

// podLayer is a full layer (has is nil: entries is indexed by slot) or a patch over parent (entries holds the
// patched slots in ascending order: has marks them, and before[w] counts the marked slots in the words before w).
// Each entry's containers are a run of the layer's own runs. A layer is never modified once its view is published.
type podLayer struct {
	parent  *podLayer
	depth   int // patches from this one down to the full layer: 0 for a full layer
	has     []uint64
	before  []int32
	entries []podEntry
	runs
}

// entry returns the pod entry of slot, and the runs its containers are in, from the newest layer that holds it; ok
// is false when no layer does (a slot numbered after the full layer was built, and never patched since).
func (l *podLayer) entry(slot int32) (e *podEntry, r *runs, ok bool) {
	for ; l != nil; l = l.parent {
		if l.has == nil {
			if int(slot) < len(l.entries) {
				return &l.entries[slot], &l.runs, true
			}
			return nil, nil, false
		}
		w, bit := slot>>6, uint64(1)<<(slot&63)
		if int(w) < len(l.has) && l.has[w]&bit != 0 {
			return &l.entries[int(l.before[w])+bits.OnesCount64(l.has[w]&(bit-1))], &l.runs, true
		}
	}
	return nil, nil, false
}

// full returns the full layer under l.
func (l *podLayer) full() *podLayer {
	for l.parent != nil {
		l = l.parent
	}
	return l
}

// buildPatch returns a patch over parent holding the current entry of every pod touched since the newest
// publication (dirty.pods, which may repeat a slot), in slot order. Called with s.mu held.
func (s *Storage) buildPatch(parent *podLayer) *podLayer {
	n := len(s.slots.pods)
	l := &podLayer{parent: parent, depth: parent.depth + 1, has: make([]uint64, (n+63)/64)}
	for _, slot := range s.dirty.pods {
		if int(slot) < n {
			l.has[slot>>6] |= 1 << (slot & 63)
		}
	}
	l.before = make([]int32, len(l.has))
	count, containers := 0, 0
	for w, word := range l.has {
		l.before[w] = int32(count)
		count += bits.OnesCount64(word)
		for ; word != 0; word &= word - 1 {
			if p := s.slots.pods[w<<6+bits.TrailingZeros64(word)]; p != nil {
				containers += len(p.containers)
			}
		}
	}
	l.entries = make([]podEntry, 0, count)
	// Sized ahead (grown by appending, they cost twice), and the names the patch's own (runs.add).
	l.names, l.usages, l.owned = make([]string, 0, containers), make([]Usage, 0, containers), true
	for w, word := range l.has {
		for ; word != 0; word &= word - 1 {
			var e podEntry
			if p := s.slots.pods[w<<6+bits.TrailingZeros64(word)]; p != nil {
				e, _ = s.appendPod(p, &l.runs) // a pod no longer servable gets an empty entry over its old one
			}
			l.entries = append(l.entries, e)
		}
	}
	return l
}
