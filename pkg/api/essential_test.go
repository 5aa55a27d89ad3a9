package api

import (
	"fmt"
	"slices"
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
		got := ix.essential(tt.namespace, sel)
		if got.String() != tt.want {
			t.Errorf("%q in %q: essential %q, want %q", tt.selector, tt.namespace, got.String(), tt.want)
		}
		if a, b := keysOf(t, podKind{pods: ix}, tt.namespace, got), keysOf(t, walked, tt.namespace, sel); !slices.Equal(a, b) {
			t.Errorf("%q in %q: %q selects %d pods, the selector %d", tt.selector, tt.namespace, got.String(), len(a), len(b))
		}
	}
	// A pod that has the value now makes the requirement essential again.
	inf.add(podMeta("ns-b", "late", map[string]string{"x": "v"}))
	if got := ix.essential("", labels.SelectorFromSet(nil).Add(mustRequirement(t, "x!=v")...)); got.String() != "x!=v" {
		t.Errorf("x!=v once a pod has x=v: essential %q, want x!=v", got.String())
	}
}

func mustRequirement(t *testing.T, s string) labels.Requirements {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	reqs, _ := sel.Requirements()
	return reqs
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
