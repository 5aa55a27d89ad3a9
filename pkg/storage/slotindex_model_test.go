package storage

import (
	"fmt"
	"maps"
	"math/rand"
	"testing"
)

// TestSlotIndexAgainstAMap: random adds, removes (slot reuse, pods re-added at other slots), publications (folds,
// renumberings) on slots, against a plain map; every published index must keep answering as it did when published.
func TestSlotIndexAgainstAMap(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewSource(seed))
		s := newSlots()
		live := map[podKey]*pod{}
		type published struct {
			x    slotIndex
			want map[podKey]int32
		}
		var views []published
		check := func(x slotIndex, want map[podKey]int32, what string) {
			t.Helper()
			if x.len() != len(want) {
				t.Fatalf("seed %d %s: len %d, want %d", seed, what, x.len(), len(want))
			}
			got := map[podKey]int32{}
			for k, i := range x.all() {
				if _, dup := got[k]; dup {
					t.Fatalf("seed %d %s: all yields %v twice", seed, what, k)
				}
				got[k] = i
			}
			if !maps.Equal(got, want) {
				t.Fatalf("seed %d %s: all %v, want %v", seed, what, got, want)
			}
			for k, i := range want {
				if j, ok := x.get(k); !ok || j != i {
					t.Fatalf("seed %d %s: get %v = %d %v, want %d", seed, what, k, j, ok, i)
				}
			}
			for n := 0; n < 300; n++ {
				k := podKey{"ns", fmt.Sprintf("p%d", n)}
				if _, ok := want[k]; !ok {
					if j, ok := x.get(k); ok {
						t.Fatalf("seed %d %s: get %v = %d, want none", seed, what, k, j)
					}
				}
			}
		}
		for step := 0; step < 3000; step++ {
			k := podKey{"ns", fmt.Sprintf("p%d", r.Intn(300))}
			// Phases of growth and shrinking, so that more than half the slots fall free (renumbering).
			bias := 3
			if (step/500)%2 == 1 {
				bias = 0
			}
			switch op := r.Intn(10); {
			case op < bias*2:
				if live[k] == nil {
					p := &pod{}
					s.add(k, p)
					live[k] = p
				}
			case op < 8:
				if p := live[k]; p != nil {
					s.remove(k, p)
					delete(live, k)
				}
			default:
				x := s.indexOf()
				want := map[podKey]int32{}
				for k, p := range live {
					want[k] = p.slot
				}
				views = append(views, published{x, want})
			}
			want := map[podKey]int32{}
			for k, p := range live {
				want[k] = p.slot
			}
			if step%50 == 0 {
				check(s.index, want, fmt.Sprintf("step %d storage", step))
			}
		}
		for i, v := range views {
			check(v.x, v.want, fmt.Sprintf("view %d", i))
		}
		layouts, bases := s.layout, map[string]bool{}
		for _, v := range views {
			bases[fmt.Sprintf("%p", v.x.base)] = true
		}
		t.Logf("seed %d: %d views, %d renumberings, %d bases", seed, len(views), layouts, len(bases))
	}
}
