package storage

import (
	"fmt"
	"maps"
	"reflect"
	"testing"
)

// contents is every pod the index holds and its slot, failing the test if all yields one twice.
func (x slotIndex) contents(t *testing.T) map[podKey]int32 {
	t.Helper()
	out := map[podKey]int32{}
	for k, i := range x.all() {
		if _, twice := out[k]; twice {
			t.Fatalf("all yields %v twice", k)
		}
		out[k] = i
	}
	return out
}

// check fails unless x holds exactly want, by all and by get, for every key of want and of also.
func (x slotIndex) check(t *testing.T, what string, want map[podKey]int32, also ...podKey) {
	t.Helper()
	if got := x.contents(t); !maps.Equal(got, want) {
		t.Fatalf("%s: all yields %v, want %v", what, got, want)
	}
	for k, w := range want {
		if i, ok := x.get(k); !ok || i != w {
			t.Fatalf("%s: get(%v) = %d, %v; want %d, true", what, k, i, ok, w)
		}
	}
	for _, k := range also {
		if _, in := want[k]; !in {
			if i, ok := x.get(k); ok {
				t.Fatalf("%s: get(%v) = %d, true; want not held", what, k, i)
			}
		}
	}
}

func key(name string) podKey { return podKey{"ns", name} }

// TestSlotIndexLayers: after pods are added and removed over a base, get and all answer for exactly the pods held,
// the changes kept are only what differs from base, base is left as it was, and folding keeps the same pods.
func TestSlotIndexLayers(t *testing.T) {
	a, b, c, d := key("a"), key("b"), key("c"), key("d")
	base := map[podKey]int32{a: 0, b: 1, c: 2}
	const removed = -1 // a change's slot when the pod is removed
	type change struct {
		key  podKey
		slot int32
	}
	cases := []struct {
		name           string
		changes        []change
		want           map[podKey]int32
		vacated, delta int // the changes kept
	}{
		{"no change", nil, base, 0, 0},
		{"a pod base lacks is added", []change{{d, 3}}, map[podKey]int32{a: 0, b: 1, c: 2, d: 3}, 0, 1},
		{"a pod of base is removed", []change{{b, removed}}, map[podKey]int32{a: 0, c: 2}, 1, 0},
		{"a pod added since base is removed", []change{{d, 3}, {d, removed}}, base, 0, 0},
		{"a pod of base removed comes back at another slot", []change{{b, removed}, {b, 3}},
			map[podKey]int32{a: 0, b: 3, c: 2}, 1, 1},
		{"a pod of base removed comes back at its slot", []change{{b, removed}, {b, 1}}, base, 0, 0},
		{"a pod added takes the slot of one of base removed", []change{{a, removed}, {d, 0}},
			map[podKey]int32{b: 1, c: 2, d: 0}, 1, 1},
		{"that slot freed again and the pod of base back in it", []change{{a, removed}, {d, 0}, {d, removed}, {a, 0}},
			base, 0, 0},
		{"every pod of base is removed", []change{{a, removed}, {b, removed}, {c, removed}}, map[podKey]int32{}, 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := newSlotIndex(maps.Clone(base))
			for _, ch := range tc.changes {
				if ch.slot == removed {
					x.drop(ch.key)
				} else {
					x.put(ch.key, ch.slot)
				}
			}
			x.check(t, "after the changes", tc.want, a, b, c, d)
			if x.changedInBase() != tc.vacated || len(x.delta) != tc.delta {
				t.Errorf("changes kept: %d vacated, delta %v; want %d and %d entries", x.changedInBase(), x.delta,
					tc.vacated, tc.delta)
			}
			if x.len() != len(tc.want) || !maps.Equal(x.base, base) {
				t.Errorf("len %d, base %v; want %d and base unmodified %v", x.len(), x.base, len(tc.want), base)
			}
			f := x.folded()
			f.check(t, "folded", tc.want, a, b, c, d)
			if f.changedInBase() != 0 || len(f.delta) != 0 || len(f.base) != len(tc.want) {
				t.Errorf("folded: base of %d, %d vacated, delta of %d; want %d, 0, 0", len(f.base), f.changedInBase(),
					len(f.delta), len(tc.want))
			}
			x.check(t, "the index folded", tc.want, a, b, c, d)
		})
	}
}

// TestSlotIndexFolds checks that slots folds the changes into a new base at a publication once they are more than an
// eighth of base's pods, and not before, so what a publication copies stays a fraction of every pod.
func TestSlotIndexFolds(t *testing.T) {
	s := newSlots()
	for i := range 1000 {
		s.add(key(fmt.Sprint(i)), &pod{})
	}
	if x := s.indexOf(); len(x.base) != 1000 || len(x.delta) != 0 {
		t.Fatalf("first publication: base of %d, delta of %d; want 1000 and 0 (folded)", len(x.base), len(x.delta))
	}
	changes := func(x slotIndex) int { return x.changedInBase() + len(x.delta) }
	// 10 pods replaced between publications: 20 changes each (the slot of a new one is a removed one's).
	next := 1000
	for round := 1; round <= 7; round++ {
		for i := range 10 {
			old := key(fmt.Sprint(next - 1000 + i))
			s.remove(old, s.get(old))
			s.add(key(fmt.Sprint(next+i)), &pod{})
		}
		next += 10
		x := s.indexOf()
		switch {
		case round < 7 && changes(x) != 20*round:
			t.Errorf("round %d: %d changes, want %d (not folded up to an eighth)", round, changes(x), 20*round)
		case round == 7 && (changes(x) != 0 || len(x.base) != 1000):
			t.Errorf("round 7: base of %d, %d changes; want 1000 and 0 (140 changes: folded)", len(x.base), changes(x))
		}
		if x.len() != 1000 {
			t.Errorf("round %d: the index holds %d pods, want 1000", round, x.len())
		}
	}
}

// TestSlotIndexRenumbers checks the index slots gives a view once the cluster shrank to less than half its slots: a
// new base numbering every pod anew, densely, each slot holding its pod.
func TestSlotIndexRenumbers(t *testing.T) {
	s := newSlots()
	pods := map[podKey]*pod{}
	for i := range 300 {
		k := key(fmt.Sprint(i))
		pods[k] = &pod{}
		s.add(k, pods[k])
	}
	s.indexOf()
	for i := range 200 {
		k := key(fmt.Sprint(i))
		s.remove(k, pods[k])
		delete(pods, k)
	}
	x := s.indexOf()
	if s.layout != 1 || len(s.pods) != 100 || len(s.free) != 0 || len(x.delta) != 0 || len(x.base) != 100 {
		t.Fatalf("after 200 of 300 pods went: layout %d, %d slots, %d free, base of %d, delta of %d; want 1, 100, 0, "+
			"100, 0", s.layout, len(s.pods), len(s.free), len(x.base), len(x.delta))
	}
	for k, p := range pods {
		if i, ok := x.get(k); !ok || s.pods[i] != p || p.slot != i {
			t.Errorf("%v: slot %d, %v; its pod's slot is %d", k, i, ok, p.slot)
		}
	}
	if x.len() != 100 {
		t.Errorf("the index holds %d pods, want 100", x.len())
	}
}

// TestViewsKeepTheirPodIndex: every view keeps the pods and slots it was published with, however storage's index
// changes after: pods added, removed, added again, the delta folded and the pods renumbered. Storage's changes
// after a publication must neither modify a base nor a delta a view holds.
func TestViewsKeepTheirPodIndex(t *testing.T) {
	f := newFixture(Options{})
	type published struct {
		v    *view
		want map[podKey]int32
	}
	var views []published
	publish := func() {
		f.endCycle(Outcome{Success: true})
		v := f.view.Load()
		views = append(views, published{v, v.index.contents(t)})
	}
	name := func(i int) string { return fmt.Sprintf("p%03d", i) }
	var all []podKey // every key ever bound
	for i := range 300 {
		f.PodBound("ns", name(i), "n1")
		all = append(all, key(name(i)))
	}
	publish()
	// 40 rounds of 7 pods deleted, 5 bound (new, or deleted earlier), each published: past the floor, the delta is
	// folded every few rounds.
	oldest, next := 0, 300
	for round := range 40 {
		for range 7 {
			f.PodDeleted("ns", name(oldest))
			oldest++
		}
		for i := range 5 {
			n := next
			if round%4 == 3 && i == 0 {
				n = oldest - 3 // one deleted a round ago comes back
			} else {
				next++
			}
			f.PodBound("ns", name(n), "n1")
			all = append(all, key(name(n)))
		}
		publish()
	}
	// The cluster shrinks: the pods are renumbered, then change again.
	for ; oldest < next-20; oldest++ {
		f.PodDeleted("ns", name(oldest))
	}
	publish()
	if f.slots.layout == 0 {
		t.Fatal("the pods were not renumbered")
	}
	f.PodDeleted("ns", name(next-1))
	f.PodBound("ns", name(0), "n1")
	publish()

	bases := map[uintptr]bool{}
	for i, p := range views {
		p.v.index.check(t, fmt.Sprintf("view %d of %d", i, len(views)), p.want, all...)
		bases[reflect.ValueOf(p.v.index.base).Pointer()] = true
	}
	if len(bases) < 5 {
		t.Errorf("%d views share %d bases: the delta was not folded", len(views), len(bases))
	}
}
