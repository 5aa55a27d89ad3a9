package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestEssentialRequirements: a list's != and notin requirements that no pod of its namespace can fail (no pod has
// the key with a value they exclude) are dropped, and only those; what the rest selects is what the whole selector
// selects, by walking, in each namespace and in all.
func TestEssentialRequirements(t *testing.T) {
	inf, ix := newIndexedPods(t, 30, func(i int) map[string]string {
		return map[string]string{"app": []string{"web", "db"}[i%2], "tier": "front"}
	})
	for i := 0; i < 10; i++ {
		inf.add(podMeta("ns-b", fmt.Sprintf("p%d", i), map[string]string{"app": "web"}))
	}
	walked := podKind{pods: cache.NewGenericLister(inf.indexer, podResource)}
	tests := []struct {
		selector, namespace, want string // want: the essential selector's text
	}{
		{"x!=v", "ns-a", ""},
		{"x!=v", "", ""},
		{"app!=none", "", ""},
		{"app notin (none,other)", "", ""},
		{"app!=web", "ns-a", "app!=web"},
		{"app notin (none,web)", "", "app notin (none,web)"},
		{"app=web,x!=v", "ns-a", "app=web"},
		{"tier=front,x!=v,y!=w", "", "tier=front"},
		{"app!=db", "ns-b", ""},    // ns-b has no db pod
		{"app!=db", "", "app!=db"}, // ns-a has
		{"app=web", "", "app=web"},
		{"x", "", "x"},
		{"!x", "", "!x"},
		{"", "", ""},
	}
	for _, tt := range tests {
		sel, err := labels.Parse(tt.selector)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := ix.essential(tt.namespace, sel)
		if got.String() != tt.want {
			t.Errorf("%q in %q: essential %q, want %q", tt.selector, tt.namespace, got.String(), tt.want)
		}
		if a, b := keysOf(t, podKind{pods: ix}, tt.namespace, got), keysOf(t, walked, tt.namespace, sel); !slices.Equal(a, b) {
			t.Errorf("%q in %q: %q selects %d pods, the selector %d", tt.selector, tt.namespace, got.String(), len(a), len(b))
		}
	}
	// A pod that has the value now makes the requirement essential again.
	inf.add(podMeta("ns-b", "late", map[string]string{"x": "v"}))
	if got, dropped := ix.essential("", parsed(t, "x!=v")); dropped || got.String() != "x!=v" {
		t.Errorf("x!=v once a pod has x=v: essential %q (dropped %v), want x!=v", got.String(), dropped)
	}
}

// walkCounting is the pod kind, counting its selections (walks or index reads).
type walkCounting struct {
	podKind
	selections int
}

func (k *walkCounting) objects(namespace string, sel labels.Selector) ([]object, error) {
	k.selections++
	return k.podKind.objects(namespace, sel)
}

// TestAllMatchingSelectorsSelectOnce (issue 26 finding 1): one user listing every pod through distinct selectors
// that each match every pod (`x!=u1-v<i>`, no pod has x) selected every pod for each list, a walk of every pod,
// before sharing the one build of them; now the lists share the build of every pod without a selection of their
// own, and answer every pod.
func TestAllMatchingSelectorsSelectOnce(t *testing.T) {
	const n = 600
	inf, ix := newIndexedPods(t, n, func(i int) map[string]string { return map[string]string{"app": "web"} })
	c := newCluster(t)
	c.pods = inf.indexer
	cpu := map[string]float64{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("p%04d", i)
		c.store.PodBound("ns-a", name, "node-a")
		cpu["ns-a/"+name] = 0.1
	}
	c.cycle(nil, cpu)
	k := &walkCounting{podKind: podKind{pods: ix}}
	s := newMetricsREST[storage.PodPoint](c.store, k, newReaders(Deps{}))
	ctx := genericapirequest.WithNamespace(asUser("attacker"), metav1.NamespaceAll)
	for i := 0; i < 10; i++ {
		sel, err := labels.Parse(fmt.Sprintf("x!=u1-v%d,app notin (u1-w%d)", i, i))
		if err != nil {
			t.Fatal(err)
		}
		obj, err := s.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(podList(t, unshared(obj)).Items); got != n {
			t.Fatalf("list %d: %d pods, want %d", i, got, n)
		}
	}
	if k.selections != 1 {
		t.Errorf("10 lists of distinct all-matching selectors made %d selections, want 1", k.selections)
	}
}

// essentialCluster: ns-a holds p0000..p0009 labelled app=web, p0005 also x=v, all served after one cycle, listed
// through the label index as cmd serves them.
func essentialCluster(t *testing.T) (*fakePodInformer, *podREST, *cluster) {
	inf, ix := newIndexedPods(t, 10, func(i int) map[string]string {
		if i == 5 {
			return map[string]string{"app": "web", "x": "v"}
		}
		return map[string]string{"app": "web"}
	})
	c := newCluster(t)
	c.pods = inf.indexer
	cpu := map[string]float64{}
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("p%04d", i)
		c.store.PodBound("ns-a", name, "node-a")
		cpu["ns-a/"+name] = 0.1
	}
	c.cycle(nil, cpu)
	return inf, newMetricsREST[storage.PodPoint](c.store, podKind{pods: ix}, newReaders(Deps{})), c
}

// listedLabels lists ns-a by selector as user (one page of limit after cont) and returns each item's labels and the
// next page's token.
func listedLabels(t *testing.T, s *podREST, user, selector string, limit int64, cont string) (map[string]labels.Set, string) {
	t.Helper()
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatal(err)
	}
	ctx := genericapirequest.WithNamespace(asUser(user), "ns-a")
	obj, err := s.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel, Limit: limit, Continue: cont})
	if err != nil {
		t.Fatal(err)
	}
	l := podList(t, unshared(obj))
	got := map[string]labels.Set{}
	for _, it := range l.Items {
		got[it.Name] = it.Labels
	}
	return got, l.Continue
}

// TestEssentialNeverAnswersWhatTheSelectorExcludes (a review's finding): a list of `app=web,x!=v` once no pod had
// x=v read the build of `app=web` made while p0005 had it, and answered p0005 labelled x=v; and a page-through of
// `app=web,x!=v` whose next page came after p0005 (x=v all its life) was deleted read another user's `app=web` build
// and listed p0005. A build of the essential selector is read only when all its entries meet the request's own.
func TestEssentialNeverAnswersWhatTheSelectorExcludes(t *testing.T) {
	t.Run("relabelled since the build", func(t *testing.T) {
		inf, s, _ := essentialCluster(t)
		listedLabels(t, s, "a", "app=web", 0, "") // kept: p0005 with x=v
		inf.update(podMeta("ns-a", "p0005", map[string]string{"app": "web", "x": "w"}))
		sel := parsed(t, "app=web,x!=v")
		got, _ := listedLabels(t, s, "b", sel.String(), 0, "")
		for name, l := range got {
			if !sel.Matches(l) {
				t.Errorf("the list of %q answers %s labelled %v", sel, name, l)
			}
		}
		if len(got) != 10 {
			t.Errorf("the list of %q answers %d pods, want 10 (p0005 is x=w now)", sel, len(got))
		}
	})
	t.Run("a next page after a deletion", func(t *testing.T) {
		inf, s, c := essentialCluster(t)
		listedLabels(t, s, "a", "app=web", 1000, "") // kept, of the committed snapshot: p0005 with x=v
		page1, token := listedLabels(t, s, "b", "app=web,x!=v", 2, "")
		if len(page1) != 2 || token == "" {
			t.Fatalf("first page %v, token %q: want 2 pods and a token", page1, token)
		}
		inf.delete(podMeta("ns-a", "p0005", nil))
		c.store.PodDeleted("ns-a", "p0005")
		page2, _ := listedLabels(t, s, "b", "app=web,x!=v", 100, token)
		for name, l := range page2 {
			if l["x"] == "v" {
				t.Errorf("page 2 of app=web,x!=v lists %s labelled %v", name, l)
			}
		}
	})
}

// TestEssentialAndTheIndexBoundTheirWork (a review's finding): a selector of every namespace with many values cost
// namespaces x values lookups (and a copy of the values a namespace) in essential and in the index's sizes at every
// list, a cached one too, before any build slot: 0.6 s and 468 MB for a 2,000-value notin over 1,000 namespaces.
// Past maxSetReads neither reads the sets: the requirement is kept and the selection is not narrowed (it walks, in
// a slot), and nothing is wrong.
func TestEssentialAndTheIndexBoundTheirWork(t *testing.T) {
	_, ix := podPerNamespace(t, 100)
	if _, dropped := ix.essential("", parsed(t, "app notin ("+valueList(maxSetReads/100+1)+")")); dropped {
		t.Error("a notin past maxSetReads over every namespace was read to be dropped")
	}
	if _, dropped := ix.essential("", parsed(t, "app notin ("+valueList(maxSetReads/100)+")")); !dropped {
		t.Error("a notin within maxSetReads, of values no pod has, was kept")
	}
	in := parsed(t, "app in (web,"+valueList(maxSetReads/100)+")")
	if _, narrowed, _ := ix.selectIn("", in); narrowed {
		t.Error("an in past maxSetReads over every namespace was read from the index")
	}
	if got := keysOf(t, podKind{pods: ix}, "", in); len(got) != 100 {
		t.Errorf("the walk selected %d pods, want 100", len(got))
	}
}

// podPerNamespace is a pod informer with the label index and one pod, labelled app=web, in each of n namespaces
// (ns-0, ns-1, ...): a selection of every namespace reads n sets per value.
func podPerNamespace(tb testing.TB, n int) (*fakePodInformer, *PodIndex) {
	tb.Helper()
	inf, ix := newIndexedPods(tb, 0, nil)
	for i := 0; i < n; i++ {
		inf.add(podMeta(fmt.Sprintf("ns-%d", i), "p", map[string]string{"app": "web"}))
	}
	return inf, ix
}

// valueList is n label values no pod has, for a selector's `in` or `notin`: "v0,v1,...".
func valueList(n int) string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("v%d", i)
	}
	return strings.Join(vs, ",")
}

// parsed is the label selector s, or the test's failure.
func parsed(tb testing.TB, s string) labels.Selector {
	tb.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		tb.Fatal(err)
	}
	return sel
}
