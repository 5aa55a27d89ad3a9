package api

import (
	"hash/maphash"

	"k8s.io/apimachinery/pkg/runtime"
)

// podTable is one namespace's pods by name: an open-addressing hash table with linear probing, whose deletions move
// the entries after the freed slot back where their probes would find them (Knuth's Algorithm R), so that no slot
// is ever left marked deleted. An insertion doubles it when three quarters of its slots would be used, a removal
// halves it when fewer than an eighth are: its size follows how many pods it holds, never how many came and went,
// where a Go map keyed by pods grows as they turn over. An operation costs a few probes whatever the namespace's
// size, and a resize, which copies every pod, one in as many operations as the table holds pods.
type podTable struct {
	slots []namedPod // a power of two long; a slot without a name is free (a pod always has one)
	n     int        // pods held
}

// namedPod is a pod the informer holds, by its name.
type namedPod struct {
	name string
	obj  runtime.Object
}

// minTableSlots is a table's least length.
const minTableSlots = 8

// tableSeed seeds the tables' hashes: they are compared within this process only.
var tableSeed = maphash.MakeSeed()

func newPodTable() *podTable { return &podTable{slots: make([]namedPod, minTableSlots)} }

// home is the slot name's probe starts at.
func (t *podTable) home(name string) int {
	return int(maphash.String(tableSeed, name) & uint64(len(t.slots)-1))
}

// find returns name's slot, else the free slot it would take: one is always free.
func (t *podTable) find(name string) (int, bool) {
	for i := t.home(name); ; i = (i + 1) & (len(t.slots) - 1) {
		switch t.slots[i].name {
		case name:
			return i, true
		case "":
			return i, false
		}
	}
}

// put adds or replaces pod name. A pod without a name (none exists: the informer keys pods by it) is not kept.
func (t *podTable) put(name string, obj runtime.Object) {
	if name == "" {
		return
	}
	i, found := t.find(name)
	if found {
		t.slots[i].obj = obj
		return
	}
	if 4*(t.n+1) > 3*len(t.slots) {
		t.resize(2 * len(t.slots))
		i, _ = t.find(name)
	}
	t.slots[i] = namedPod{name: name, obj: obj}
	t.n++
}

// remove takes pod name out, and returns the object it held, if any.
func (t *podTable) remove(name string) (runtime.Object, bool) {
	if name == "" { // find would take the first free slot for it
		return nil, false
	}
	i, found := t.find(name)
	if !found {
		return nil, false
	}
	held := t.slots[i].obj
	mask := len(t.slots) - 1
	// Each entry of the run after the freed slot i stays where it is when its home lies cyclically in (i, j]: its
	// probe does not pass i. Otherwise it moves back to i, and the slot it left is the one freed.
	for j := (i + 1) & mask; t.slots[j].name != ""; j = (j + 1) & mask {
		h := t.home(t.slots[j].name)
		if (i < j && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = namedPod{}
	t.n--
	if len(t.slots) > minTableSlots && 8*t.n < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
	return held, true
}

// resize moves the pods into a table of size slots.
func (t *podTable) resize(size int) {
	old := t.slots
	t.slots = make([]namedPod, size)
	for _, p := range old {
		if p.name != "" {
			i, _ := t.find(p.name)
			t.slots[i] = p
		}
	}
}

// objects returns a copy of the pods held.
func (t *podTable) objects() []runtime.Object {
	out := make([]runtime.Object, 0, t.n)
	for _, p := range t.slots {
		if p.name != "" {
			out = append(out, p.obj)
		}
	}
	return out
}
