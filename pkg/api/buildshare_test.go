package api

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// halves is a cluster whose ns-a has 600 pods served at 0.1 cores, p000 to p299 labelled half=a and p300 to p599
// half=b, and whose storage never publishes a removal by itself (its timer is held): the snapshot stays.
func halves(t *testing.T) *cluster {
	c := newCluster(t)
	c.store = storage.New(storage.Options{Source: "prometheus", Resolution: 15 * time.Second,
		Now: func() time.Time { return time.Unix(0, c.clock.Load()) }, AfterFunc: func(time.Duration, func()) {}})
	cpu := map[string]float64{}
	for i := range 600 {
		name, half := fmt.Sprintf("p%03d", i), "a"
		if i >= 300 {
			half = "b"
		}
		_ = c.pods.Add(podMeta("ns-a", name, map[string]string{"half": half}))
		c.store.PodBound("ns-a", name, "node-a")
		cpu["ns-a/"+name] = 0.1
	}
	c.cycle(nil, cpu)
	return c
}

// listOf lists ns-a with a label and a field selector ("" for none), from the continue token cont, and returns the
// list and what a user sees of it: each item's name, labels and CPU.
func listOf(t *testing.T, s *podREST, label, field string, limit int64, cont string) (*metrics.PodMetricsList, string) {
	t.Helper()
	opts := &metainternalversion.ListOptions{Limit: limit, Continue: cont}
	var err error
	if opts.LabelSelector, err = labels.Parse(label); err != nil {
		t.Fatal(err)
	}
	if field != "" {
		if opts.FieldSelector, err = fields.ParseSelector(field); err != nil {
			t.Fatal(err)
		}
	}
	obj, err := s.List(genericapirequest.WithNamespace(context.Background(), "ns-a"), opts)
	if err != nil {
		t.Fatalf("%s %s: %v", label, field, err)
	}
	list := unshared(obj).(*metrics.PodMetricsList)
	var seen []string
	for _, it := range list.Items {
		seen = append(seen, fmt.Sprintf("%s%v=%s", it.Name, it.Labels, it.Containers[0].Usage.Cpu()))
	}
	return list, strings.Join(seen, " ")
}

// TestDistinctSelectorsOfOneSetShareABuild (issue 26, finding 1): one user's distinct selectors that each select
// every pod of ns-a made a build each (its entries, sort, list and encodings), kept until the user's share was
// full: 20 selectors cost 20 builds and 20 times the bytes kept. They select the same pods, so they share one
// build: its answer and the bytes it keeps, and a page-through with yet another spelling reads it too.
func TestDistinctSelectorsOfOneSetShareABuild(t *testing.T) {
	c := halves(t)
	s := c.podStorage()
	registerMetrics()
	gen, before := c.store.Latest().Generation(), buildsSoFar(t)
	_, want := listOf(t, s, "x!=u1-v0", "", 0, "")
	kept, _ := s.builds.keeper.usage("")
	spellings := []struct{ label, field string }{{"half in (a,b)", ""}, {"", "metadata.namespace=ns-a"}, {"half", ""}}
	for i := 1; i < 20; i++ {
		spellings = append(spellings, struct{ label, field string }{fmt.Sprintf("x!=u1-v%d", i), ""})
	}
	for _, sp := range spellings {
		if _, got := listOf(t, s, sp.label, sp.field, 0, ""); got != want {
			t.Fatalf("%q %q listed %.200s..., want %.200s...", sp.label, sp.field, got, want)
		}
	}
	if now, _ := s.builds.keeper.usage(""); now != kept {
		t.Errorf("the reader cache keeps %d bytes after %d selections of one set, want %d (one build's)", now, len(spellings)+1, kept)
	}
	var paged []string
	for cont, pages := "", 0; pages == 0 || cont != ""; pages++ {
		list, seen := listOf(t, s, "y!=w", "", 100, cont)
		paged, cont = append(paged, seen), list.Continue
	}
	if got := strings.Join(paged, " "); got != want {
		t.Errorf("paging through with y!=w listed %.200s..., want %.200s...", got, want)
	}
	if g := c.store.Latest().Generation(); g != gen {
		t.Fatalf("storage published (generation %d to %d): the test no longer checks one snapshot", gen, g)
	}
	if n := buildsSoFar(t) - before; n != 1 {
		t.Errorf("%d selections of every pod of ns-a and a page-through made %v builds, want 1", len(spellings)+2, n)
	}
}

// TestSelectionsOfOtherPodsGetTheirOwnBuilds: a build is read for another selection only when it holds exactly
// the objects that selection selects, as the informer has them: not for a set of the same fingerprint (every
// set of one size collides here), nor one pod more or fewer, nor when a pod's labels changed since.
func TestSelectionsOfOtherPodsGetTheirOwnBuilds(t *testing.T) {
	c := halves(t)
	s := c.podStorage()
	s.builds.fingerprint = func(objs []object) objectSet { return objectSet{n: len(objs)} }
	check := func(label, field string, n int, want func(name string, lbls map[string]string) bool) {
		t.Helper()
		list, _ := listOf(t, s, label, field, 0, "")
		if len(list.Items) != n {
			t.Errorf("%q %q listed %d pods, want %d", label, field, len(list.Items), n)
		}
		for _, it := range list.Items {
			if !want(it.Name, it.Labels) {
				t.Errorf("%q %q listed %s %v", label, field, it.Name, it.Labels)
				return
			}
		}
	}
	half := func(h string) func(string, map[string]string) bool {
		return func(_ string, l map[string]string) bool { return l["half"] == h }
	}
	all := func(string, map[string]string) bool { return true }
	check("half=a", "", 300, half("a"))
	check("half=b", "", 300, half("b")) // the same fingerprint as half=a's
	check("x!=v0", "", 600, all)
	check("", "metadata.name!=p007", 599, func(name string, _ map[string]string) bool { return name != "p007" })
	check("half!=c", "", 600, all)
	check("half!=a", "", 300, half("b"))
	_ = c.pods.Update(podMeta("ns-a", "p010", map[string]string{"half": "a", "tier": "web"}))
	check("x!=v1", "", 600, func(name string, l map[string]string) bool {
		return name != "p010" || maps.Equal(l, map[string]string{"half": "a", "tier": "web"})
	})
}

// TestRemovalUnsharesASharedBuild: a build read by several selections is made anew once a pod it lists is
// deleted, whichever selection comes next: the deleted pod is served to none of them.
func TestRemovalUnsharesASharedBuild(t *testing.T) {
	c := halves(t)
	s := c.podStorage()
	registerMetrics()
	for _, label := range []string{"x!=v0", "x!=v1"} {
		if list, _ := listOf(t, s, label, "", 0, ""); len(list.Items) != 600 {
			t.Fatalf("%s listed %d pods before the deletion, want 600", label, len(list.Items))
		}
	}
	gen, removals, before := c.store.Latest().Generation(), c.store.Removals(), buildsSoFar(t)
	_ = c.pods.Delete(podMeta("ns-a", "p005", nil))
	c.store.PodDeleted("ns-a", "p005")
	if c.store.Removals() == removals || c.store.Latest().Generation() != gen {
		t.Fatal("the deletion was not counted, or published: the test no longer checks a build of one snapshot")
	}
	for _, label := range []string{"x!=v1", "x!=v0", "x!=v2"} {
		list, _ := listOf(t, s, label, "", 0, "")
		if len(list.Items) != 599 || slices.ContainsFunc(list.Items, func(m metrics.PodMetrics) bool { return m.Name == "p005" }) {
			t.Errorf("%s listed %d pods after p005's deletion, want 599 without p005", label, len(list.Items))
		}
	}
	if n := buildsSoFar(t) - before; n != 1 {
		t.Errorf("three selections of ns-a's pods after a deletion made %v builds, want 1", n)
	}
}

// TestOneUsersLongSelectorsLeaveOthersTheirAliases (review of issue 26's sharing, MEDIUM): the selections remembered
// as reading another's build were one budget per snapshot for every user, counted in key bytes: one list with a
// selector of almost 256 KiB that matches every pod filled it, and every other user's selection of the same pods
// then walked its selection again on each request. Each user now remembers at most a quarter.
func TestOneUsersLongSelectorsLeaveOthersTheirAliases(t *testing.T) {
	c := halves(t)
	s := c.podStorage()
	listAs := func(user, label string) {
		t.Helper()
		sel, err := labels.Parse(label)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.List(asUser(user), &metainternalversion.ListOptions{LabelSelector: sel}); err != nil {
			t.Fatalf("%s listing %.40s...: %v", user, label, err)
		}
	}
	listAs("bob", "") // the build every later selection reads
	var long []string
	for size, i := 0, 0; size < maxAliasBytes-100; i++ { // room left for her key's other parts, not for alice's
		r := fmt.Sprintf("k%06d!=v", i)
		long, size = append(long, r), size+len(r)+1
	}
	listAs("mallory", strings.Join(long, ",")) // one request: about 256 KiB of selections, every pod
	for i := range 40 {                        // and as many short ones as she likes
		listAs("mallory", fmt.Sprintf("m!=v%d", i))
	}
	listAs("alice", "app!=zzz")
	gen := c.store.Latest().Generation()
	s.builds.mu.Lock()
	g := s.builds.gens[gen]
	aliceKey := ""
	for key := range g.sets.alias {
		if strings.Contains(key, "app!=zzz") {
			aliceKey = key
		}
	}
	mallory := g.sets.userBytes["mallory"]
	s.builds.mu.Unlock()
	if aliceKey == "" {
		t.Errorf("alice's selection of every pod is not remembered as reading the shared build after mallory's " +
			"selections: each of her lists walks its selection again")
	}
	if mallory > maxAliasBytesPerUser {
		t.Errorf("mallory's selections take %d bytes of the aliases, want at most %d", mallory, maxAliasBytesPerUser)
	}
}
