package api

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// A list costs what it selects, not how its selector is spelled (DESIGN.md section 3): `x!=v1`, `x!=v2`, ... of a
// key or value no pod has all select every pod. So a list's != and notin requirements that no pod of its namespace
// can fail are left out before its build is looked up, and such lists read the one build of what remains instead
// of each walking every pod. The build read is then another selection's, whose entries carry the labels they were
// listed with: it is read only when every entry meets the request's own selector (build.meets, in pageBuild), else
// the request's own selector is built, as without this. Watches keep their selector: it must hold for pods to come.

// maxSetReads bounds the label sets (a namespace's set of a key and value) one selection reads or counts, in the
// index (smallest) and here: a selector of every namespace with many values costs namespaces x values lookups per
// request, before any build slot. Past it, the index does not narrow the selection (it walks, in a slot) and no
// requirement is left out.
const maxSetReads = 4096

// withinSetReads reports whether reading values' sets in namespaces stays within maxSetReads.
func withinSetReads(namespaces, values []string) bool {
	return len(namespaces) <= maxSetReads && len(values) <= maxSetReads/max(1, len(namespaces))
}

// essential returns sel without its != and notin requirements that no pod of namespace ("" for all) can fail, as no
// pod has the key with a value they exclude; dropped is false, and sel returned, when there are none. The counts
// rule a requirement out at once; one they say no pod fails is confirmed on the indexer's sets, which the counts lag.
func (ix *PodIndex) essential(namespace string, sel labels.Selector) (_ labels.Selector, dropped bool) {
	if sel == nil {
		return sel, false
	}
	reqs, ok := sel.Requirements()
	if !ok || !hasNegative(reqs) {
		return sel, false
	}
	namespaces, _, _ := ix.narrowing(namespace, sel)
	kept := make(labels.Requirements, 0, len(reqs))
	for _, r := range reqs {
		if op := r.Operator(); op == selection.NotEquals || op == selection.NotIn {
			if values := r.ValuesUnsorted(); withinSetReads(namespaces, values) && ix.noneHas(namespaces, r.Key(), values) {
				dropped = true
				continue
			}
		}
		kept = append(kept, r)
	}
	if !dropped {
		return sel, false
	}
	return labels.NewSelector().Add(kept...), true
}

// hasNegative reports whether reqs hold a != or notin requirement.
func hasNegative(reqs labels.Requirements) bool {
	for _, r := range reqs {
		if op := r.Operator(); op == selection.NotEquals || op == selection.NotIn {
			return true
		}
	}
	return false
}

// noneHas reports whether no pod of namespaces has key with any of values.
func (ix *PodIndex) noneHas(namespaces []string, key string, values []string) bool {
	ix.mu.RLock()
	for _, ns := range namespaces {
		for _, v := range values {
			if ix.counts[ix.setHash(ns, key, v)] > 0 {
				ix.mu.RUnlock()
				return false
			}
		}
	}
	ix.mu.RUnlock()
	for _, ns := range namespaces {
		for _, v := range values {
			if set, err := ix.indexer.ByIndex(PodLabelIndex, labelValue(ns, key, v)); err != nil || len(set) > 0 {
				return false
			}
		}
	}
	return true
}

// meets reports whether every entry of b meets sel, by the labels it was listed with.
func (b *build[P]) meets(sel labels.Selector) bool {
	for i := range b.entries {
		if !sel.Matches(labels.Set(b.entries[i].labels)) {
			return false
		}
	}
	return true
}
