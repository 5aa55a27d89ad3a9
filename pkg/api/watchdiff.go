package api

import (
	"maps"
	"sort"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// diff is the delivery that turns prev into cur: ADDED for entries of cur not in prev (new, or entered the selection),
// MODIFIED for those whose values or labels changed, DELETED for those of prev not in cur (each a copy at cur's
// resourceVersion), and DELETED by key alone for deleted: objects deleted since, that a resuming watch must still
// be told of. An entry whose object is another under the same name (a StatefulSet's pod deleted and created again)
// is the old one's DELETED and the new one's ADDED, as kube-apiserver's watch tells them, not a MODIFIED that would
// carry on the old object's series. Both entry lists are sorted, so this is one merge, with no map of either.
func diff[P any](prev []entry[P], cur *build[P], deleted []object, acct *deliveryAccount) *delivery {
	item := cur.deliveryItems(acct)
	gone := func(i int) *watchItem[P] { // prev's entry i as a DELETED event carries it, at cur's resourceVersion
		return &watchItem[P]{res: cur.res, e: &prev[i], rv: cur.rv, created: cur.created}
	}
	k, next := cur.res.kind, cur.entries
	var events []watch.Event
	i, j := 0, 0
	for i < len(prev) || j < len(next) {
		switch {
		case j == len(next) || (i < len(prev) && prev[i].less(&next[j].object)):
			events = append(events, watch.Event{Type: watch.Deleted, Object: gone(i)})
			i++
		case i == len(prev) || next[j].less(&prev[i].object):
			events = append(events, watch.Event{Type: watch.Added, Object: item(j)})
			j++
		case prev[i].uid != 0 && next[j].uid != 0 && prev[i].uid != next[j].uid:
			events = append(events, watch.Event{Type: watch.Deleted, Object: gone(i)},
				watch.Event{Type: watch.Added, Object: item(j)})
			i++
			j++
		default:
			if !k.same(&prev[i].point, &next[j].point) || !maps.Equal(prev[i].labels, next[j].labels) {
				events = append(events, watch.Event{Type: watch.Modified, Object: item(j)})
			}
			i++
			j++
		}
	}
	for _, o := range deleted {
		n := sort.Search(len(next), func(x int) bool { return !next[x].less(&o) })
		if n < len(next) && next[n].object.key() == o.key() {
			continue
		}
		events = append(events, watch.Event{Type: watch.Deleted, Object: k.empty(o.namespace, o.name, cur.rv)})
	}
	return &delivery{rv: cur.rv, gen: cur.generation, events: events, acct: acct}
}

// deleted returns the objects of snap within sel's namespace and field selector that no longer exist (deleted, or a
// pod no longer Running): a watch resuming from snap must still tell its client that they left, though the
// informers that would give their labels have forgotten them.
func (s *metricsREST[P]) deleted(snap storage.Snapshot, sel scope) []object {
	var out []object
	s.kind.each(snap, func(namespace, name string) {
		if (sel.namespace != "" && namespace != sel.namespace) || !sel.matchFields(namespace, name) {
			return
		}
		if _, ok, err := s.kind.object(namespace, name); err == nil && !ok {
			out = append(out, object{namespace: namespace, name: name})
		}
	})
	return out
}
