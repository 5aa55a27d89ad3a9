package storage

import (
	"iter"
	"maps"
	"math/bits"
	"slices"
)

// slotIndex maps each pod to its slot (slots), in two layers, so that the views published while pods come and go
// share what did not change between them. One map of every pod, shared by views only while no pod came or went,
// had to be copied whole at the first change after each publication: under steady churn that is every
// publication, and every view kept held a copy of every pod.
//
// base is never modified once made, so any number of views share it. The changes since base are vacated, a bit per
// slot of base whose pod is no longer there (removed, or added again at another slot), and delta, the slot of every
// pod base lacks or numbers otherwise. Storage changes them in place until a view holds them, then copies them
// first (slots.own): the changes since base, not every pod. Once they grow past a fraction of base, the next
// publication folds them into a new base (needsFold, folded), which bounds both what a copy costs and what each kept view
// holds of its own. A pod of base still at its slot, most pods, is found by one lookup and a bit: reading costs
// what it did with one map; a pod added since base takes a second lookup, in the small delta.
type slotIndex struct {
	base    map[podKey]int32
	vacated []uint64 // bit i: base's pod of slot i is no longer there
	delta   map[podKey]int32
}

// foldFloor is the number of changes up to which they are not folded whatever the size of base: a small cluster's
// changes cost little to copy, and folding them would rebuild its whole index at almost every publication.
const foldFloor = 64

// newSlotIndex returns an index of the pods of base, which is never modified after.
func newSlotIndex(base map[podKey]int32) slotIndex {
	words := 0
	for _, i := range base {
		words = max(words, int(i)/64+1)
	}
	return slotIndex{base: base, vacated: make([]uint64, words), delta: map[podKey]int32{}}
}

// get returns the slot of key; ok is false when the index does not hold it.
func (x slotIndex) get(key podKey) (slot int32, ok bool) {
	if i, ok := x.base[key]; ok && !x.isVacated(i) {
		return i, true
	}
	i, ok := x.delta[key]
	return i, ok
}

// all yields every pod the index holds, and its slot, once each, in no particular order.
func (x slotIndex) all() iter.Seq2[podKey, int32] {
	return func(yield func(podKey, int32) bool) {
		for k, i := range x.base {
			if !x.isVacated(i) && !yield(k, i) {
				return
			}
		}
		for k, i := range x.delta {
			if !yield(k, i) {
				return
			}
		}
	}
}

// len is the number of pods the index holds: base's still at their slot, and delta's.
func (x slotIndex) len() int { return len(x.base) - x.changedInBase() + len(x.delta) }

// put records that key is in slot, and drop that it was removed. They modify vacated and delta: only storage calls
// them, on changes no view holds (slots.own). A pod of base back at its slot leaves no change behind.
func (x *slotIndex) put(key podKey, slot int32) {
	if i, ok := x.base[key]; ok {
		x.mark(i, i != slot)
		if i == slot {
			delete(x.delta, key)
			return
		}
	}
	x.delta[key] = slot
}

func (x *slotIndex) drop(key podKey) {
	delete(x.delta, key)
	if i, ok := x.base[key]; ok {
		x.mark(i, true)
	}
}

// copied returns the index with copies of its changes, for storage to modify while views hold x.
func (x slotIndex) copied() slotIndex {
	return slotIndex{base: x.base, vacated: slices.Clone(x.vacated), delta: maps.Clone(x.delta)}
}

// needsFold says whether the changes are to be folded into a new base: once they are more than an eighth of base's pods
// (and more than foldFloor), a copy of them at each publication would approach a copy of every pod.
func (x slotIndex) needsFold() bool {
	return x.changedInBase()+len(x.delta) > max(foldFloor, len(x.base)/8)
}

// folded returns an index of the same pods at the same slots, with a new base and no changes: the views that hold
// x keep x's maps as they are.
func (x slotIndex) folded() slotIndex {
	base := make(map[podKey]int32, x.len())
	for k, i := range x.all() {
		base[k] = i
	}
	return newSlotIndex(base)
}

func (x slotIndex) isVacated(slot int32) bool { return x.vacated[slot>>6]&(1<<(slot&63)) != 0 }

func (x *slotIndex) mark(slot int32, vacated bool) {
	if vacated {
		x.vacated[slot>>6] |= 1 << (slot & 63)
	} else {
		x.vacated[slot>>6] &^= 1 << (slot & 63)
	}
}

// changedInBase counts base's pods no longer at their slot.
func (x slotIndex) changedInBase() int {
	n := 0
	for _, w := range x.vacated {
		n += bits.OnesCount64(w)
	}
	return n
}
