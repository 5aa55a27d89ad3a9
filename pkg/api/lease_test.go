package api

import (
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
)

// One reader that starts a small page-through every cycle and continues each within the lease must not keep a
// snapshot a cycle alive: a kept build's entries point into its snapshot, whatever the keeper counts.
func TestLeasedPageThroughsKeepBoundedSnapshots(t *testing.T) {
	c, _, s, cpu := hookedPods(t, 20)
	var tokens []string
	for cycle := 0; cycle < 12; cycle++ {
		c.cycle(nil, cpu)
		first := podList(t, mustList(t, s, &metainternalversion.ListOptions{Limit: 1}))
		tokens = append(tokens, first.Continue)
		for i, tok := range tokens { // every page-through goes on, renewing its lease
			l := podList(t, mustList(t, s, &metainternalversion.ListOptions{Limit: 1, Continue: tok}))
			if len(l.Items) != 1 || l.Continue == "" {
				t.Fatalf("cycle %d, page-through %d: %d items, continue %q: want one more pod", cycle, i, len(l.Items), l.Continue)
			}
			tokens[i] = l.Continue
		}
		s.builds.mu.Lock()
		n := len(s.builds.gens)
		s.builds.mu.Unlock()
		if n > 4 {
			t.Fatalf("cycle %d: builds of %d snapshots kept, want at most 4", cycle, n)
		}
	}
}
