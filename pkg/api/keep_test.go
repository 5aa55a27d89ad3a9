package api

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// asUser is ctx as a request of user name in namespace ns-a.
func asUser(name string) context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
	return genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: name})
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// heapSlack is what a heap bound allows beyond the reader budget: generous, for the collector's and the runtime's own.
const heapSlack = 16 << 20

// heapGrowth is how much the heap grew since before, once it is within budget and heapSlack or a second has passed:
// evicted builds go once their drops ran, on their own goroutines.
func heapGrowth(before, budget int64) int64 {
	grown := heapInUse() - before
	for i := 0; i < 50 && grown > budget+heapSlack; i++ {
		time.Sleep(20 * time.Millisecond)
		grown = heapInUse() - before
	}
	return grown
}

// TestSelectorCyclingKeepsWithinBudget: one user listing every pod through many distinct selectors that each match
// everything (full lists and limit=1 pages) keeps what the builds keep within the budget, and evicts its own
// builds, never another user's small one; the heap grows by no more than the budget and some slack. Before the
// budget in bytes, 300 such lists of 2,000 pods kept 256 builds and 8 full lists: about 85 MB.
func TestSelectorCyclingKeepsWithinBudget(t *testing.T) {
	const budget = 4 << 20
	_, k, s, _ := hookedPods(t, 2000)
	s.builds.keeper = newKeeper(budget)
	hpa, mallory := asUser("hpa"), asUser("mallory")
	mine := listOpts(t, "", "metadata.name=p001")
	if obj, err := s.List(hpa, mine); err != nil || len(podList(t, obj).Items) != 1 {
		t.Fatalf("the hpa's list: %v", err)
	}
	_, hpaBytes := s.builds.keeper.usage("hpa")
	if max := entryBytes(make([]entry[struct{}], 1)) + 4096; hpaBytes <= 0 || hpaBytes > max {
		t.Errorf("a list of one pod of 2,000 keeps %d bytes, want some and at most %d: a build costs what it selects",
			hpaBytes, max)
	}
	before := heapInUse()
	for i := range 300 {
		opts := listOpts(t, fmt.Sprintf("x!=v%d", i), "")
		if i%2 == 1 {
			opts.Limit = 1
		}
		obj, err := s.List(mallory, opts)
		if err != nil {
			t.Fatalf("selector %d: %v", i, err)
		}
		if want := map[bool]int{true: 1, false: 2000}[i%2 == 1]; len(podList(t, obj).Items) != want {
			t.Fatalf("selector %d: %d pods, want %d", i, len(podList(t, obj).Items), want)
		}
		if total, _ := s.builds.keeper.usage(""); total > budget {
			t.Fatalf("after %d distinct selectors the builds keep %d bytes, over the budget of %d", i+1, total, budget)
		}
	}
	builds := k.builds.Load()
	if _, err := s.List(hpa, mine); err != nil {
		t.Fatal(err)
	}
	if k.builds.Load() != builds {
		t.Error("another user's distinct selectors evicted the hpa's build: its list was built again")
	}
	if grown := heapGrowth(before, budget); grown > budget+heapSlack {
		t.Errorf("the heap grew by %d MiB for one user's distinct selectors, want at most the budget (%d MiB) and %d MiB",
			grown>>20, budget>>20, heapSlack>>20)
	}
}

// TestKeeperShares: the keeper's choice of what to evict, user by user.
func TestKeeperShares(t *testing.T) {
	type add struct {
		user  string
		bytes int64
	}
	tests := []struct {
		name     string
		budget   int64
		adds     []add
		wantKept []bool // each add's item still kept at the end
	}{
		{"a user over its share evicts its own oldest", 100,
			[]add{{"b", 10}, {"a", 40}, {"a", 40}, {"a", 40}}, []bool{true, false, true, true}},
		{"a user cycling evicts only its own", 100,
			[]add{{"b", 30}, {"a", 30}, {"a", 30}, {"a", 30}, {"a", 30}}, []bool{true, false, false, true, true}},
		{"a user under its share takes from the heaviest", 100,
			[]add{{"a", 30}, {"a", 30}, {"a", 30}, {"b", 20}}, []bool{false, true, true, true}},
		{"more than the budget is not kept", 100, []add{{"a", 10}, {"a", 101}}, []bool{true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp := newKeeper(tt.budget)
			items := make([]*kept, len(tt.adds))
			for i, a := range tt.adds {
				items[i] = &kept{user: a.user, drop: func(string, bool) {}}
				kp.hold(items[i], a.user)
				if !kp.admit(items[i], a.bytes) {
					kp.forget(items[i])
				}
			}
			for i, k := range items {
				kp.mu.Lock()
				got := len(k.holders) > 0
				kp.mu.Unlock()
				if got != tt.wantKept[i] {
					t.Errorf("add %d (%s, %d bytes): kept %v, want %v", i, tt.adds[i].user, tt.adds[i].bytes, got, tt.wantKept[i])
				}
			}
			if total, _ := kp.usage(""); total > tt.budget {
				t.Errorf("%d bytes kept, over the budget of %d", total, tt.budget)
			}
		})
	}
}

// TestKeeperEstimates: the keeper's estimate of a built list is within a factor of two of what the list takes on
// the heap, for pods of one and of three containers.
func TestKeeperEstimates(t *testing.T) {
	for _, containers := range []int{1, 3} {
		es := podEntries(2000, containers, "ns", "c")
		// Other tests' goroutines may still free memory between the two readings (a run here once read 168 KB for
		// a 2 MB list), so one reading of five within the bounds will do: a wrong estimate misses all five.
		est, used := listBytes(es), int64(0)
		for range 5 {
			before := heapInUse()
			list := podKind{}.list(es, "1", metav1.Now())
			used = heapInUse() - before
			runtime.KeepAlive(list)
			if est >= used/2 && est <= 2*used {
				break
			}
		}
		if est < used/2 || est > 2*used {
			t.Errorf("%d containers a pod: a list of 2,000 estimated at %d bytes, %d on the heap", containers, est, used)
		}
	}
}

// TestSharedBuildChargedToItsReaders: a build one user made and another reads (its own page sizes, its own full
// list) is charged to both, half each, so one user's reading never spends another's share.
func TestSharedBuildChargedToItsReaders(t *testing.T) {
	_, k, s, _ := hookedPods(t, 2000)
	s.builds.keeper = newKeeper(64 << 20)
	if _, err := s.List(asUser("alice"), listOpts(t, "", "")); err != nil {
		t.Fatal(err)
	}
	_, alone := s.builds.keeper.usage("alice")
	for _, limit := range []int64{0, 7, 11, 13, 500} {
		opts := listOpts(t, "", "")
		opts.Limit = limit
		for range 3 {
			obj, err := s.List(asUser("bob"), opts)
			if err != nil {
				t.Fatal(err)
			}
			if opts.Continue = podList(t, obj).Continue; opts.Continue == "" {
				break
			}
		}
	}
	if k.builds.Load() != 1 {
		t.Fatalf("%d builds, want the one both users read", k.builds.Load())
	}
	total, alice := s.builds.keeper.usage("alice")
	_, bob := s.builds.keeper.usage("bob")
	if alice+bob > total || total-alice-bob > 2 {
		t.Errorf("alice is charged %d and bob %d bytes of %d kept, want their shares to add up", alice, bob, total)
	}
	if alice > total/2+1 || alice < alone/2 {
		t.Errorf("alice, who made the build bob read, is charged %d bytes of %d kept (%d before bob read), want half",
			alice, total, alone)
	}
}

// TestRefundedPageChargesNoMore: a shared page let go of (more pages than maxSharedPageItems) is refunded, and an
// encoding of it made afterwards, by a request that still has it, is not charged: what is kept does not grow for
// bytes nobody keeps.
func TestRefundedPageChargesNoMore(t *testing.T) {
	_, _, s, _ := hookedPods(t, 2000)
	s.builds.keeper = newKeeper(64 << 20)
	ctx := asUser("alice")
	opts := listOpts(t, "", "")
	opts.Limit = smallPage
	first, err := s.List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := first.(kruntime.CacheableObject); !ok {
		t.Fatalf("the first page is not shared: %T", first)
	}
	for limit := int64(smallPage - 1); limit > smallPage-4; limit-- { // three page-throughs let it go
		opts := listOpts(t, "", "")
		opts.Limit = limit
		for {
			obj, err := s.List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if opts.Continue = podList(t, obj).Continue; opts.Continue == "" {
				break
			}
		}
	}
	before, _ := s.builds.keeper.usage("")
	encode := func(_ kruntime.Object, w io.Writer) error { _, err := w.Write(make([]byte, 100_000)); return err }
	if err := first.(kruntime.CacheableObject).CacheEncode("test", encode, io.Discard); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.builds.keeper.usage(""); after != before {
		t.Errorf("encoding a page let go of charged %d bytes (%d kept before, %d after)", after-before, before, after)
	}
}

// podEntries is n pods' entries of namespace, pod-00000 on, each of containers containers named prefix0 on, with
// swap: what the size estimates are checked against.
func podEntries(n, containers int, namespace, prefix string) []entry[storage.PodPoint] {
	es := make([]entry[storage.PodPoint], n)
	for i := range es {
		names, usages := make([]string, containers), make([]storage.Usage, containers)
		for j := range names {
			names[j] = fmt.Sprintf("%s%d", prefix, j)
			usages[j] = storage.Usage{CPU: 123456789, Memory: 123456789}.WithSwap(1)
		}
		es[i] = entry[storage.PodPoint]{object: object{namespace: namespace, name: fmt.Sprintf("pod-%05d", i)},
			point: storage.PodPoint{Timestamp: sampleTime, Window: time.Second, Names: names, Usages: usages}}
	}
	return es
}
