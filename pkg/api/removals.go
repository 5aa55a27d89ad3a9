package api

import (
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Objects deleted since a build was listed: requests that come after the deletion do not share the build (get) when
// it lists one of them, and a watch joining a feed that leads from it is not told of them. Storage names the
// objects its latest removals were (RemovedAfter), so a build that lists none of them stays shared: a deletion in
// one namespace does not make every cached list anew until storage publishes it.
//
// A watch joins its selection's feed where the feed is: at the build it made for the newest snapshot it took in.
// When an object was deleted since that build was listed, the feed tells its watchers once storage publishes the
// deletion (at once, or within storage.MinPublishInterval); a watch joining meanwhile must not be told of the object
// as if it existed. So it starts from the feed's build without the objects the informers no longer have, and the
// feed's DELETED for them is not sent to it: it was never told of them, or its initial events said they went.

// stale reports whether b, made, may list an object removed by the time storage's Removals reached removals: it
// was listed before, and one of the objects removed since is among its entries, or storage no longer recalls which
// they were. One still being made is not: get waits for it, then checks again.
func (b *build[P]) stale(removals uint64) bool {
	select {
	case <-b.done:
	default:
		return false
	}
	checked := max(b.removals, b.checked.Load())
	if b.err != nil || checked >= removals {
		return false
	}
	removed, upTo, ok := b.res.snaps.RemovedAfter(checked)
	if !ok {
		return true
	}
	for _, r := range removed {
		if b.lists(r) {
			return true
		}
	}
	for old := b.checked.Load(); old < upTo && !b.checked.CompareAndSwap(old, upTo); old = b.checked.Load() {
	}
	return upTo < removals // never: storage names a removal before it counts it
}

// lists reports whether b's entries, sorted, hold the removed object r (a node's Namespace is "", a pod's never).
func (b *build[P]) lists(r storage.Removal) bool {
	o := object{namespace: r.Namespace, name: r.Name}
	i := sort.Search(len(b.entries), func(i int) bool { return !b.entries[i].less(&o) })
	return i < len(b.entries) && b.entries[i].namespace == o.namespace && b.entries[i].name == o.name
}

// current returns the build a watch joining a feed at b starts from: b, or when b may list an object removed since
// (build.stale), a copy of b without the objects the informers no longer have (or have another object under the
// name: a pod re-created), with their keys.
func (s *metricsREST[P]) current(b *build[P]) (*build[P], map[string]struct{}) {
	if !b.stale(s.snaps.Removals()) {
		return b, nil
	}
	var gone map[string]struct{}
	es := make([]entry[P], 0, len(b.entries))
	for _, e := range b.entries {
		if o, ok, err := s.kind.object(e.namespace, e.name); err == nil && (!ok || replaced(&e.object, &o)) {
			if gone == nil {
				gone = map[string]struct{}{}
			}
			gone[e.key()] = struct{}{}
			continue
		}
		es = append(es, e)
	}
	if gone == nil {
		return b, nil
	}
	return &build[P]{res: b.res, key: b.key, rv: b.rv, generation: b.generation, created: b.created, entries: es,
		removals: b.removals, done: closed}, gone
}

// replaced reports whether the informers' object now is another than the one a build listed under the name
// (either unknown: not known to be another).
func replaced(listed, now *object) bool {
	return listed.uid != 0 && now.uid != 0 && listed.uid != now.uid
}

// told returns a delivery of the feed as the watch is to send it: without the DELETED of an object withheld from it
// (see current), and with ADDED for one that comes back (a MODIFIED of an object its client does not know).
func (w *watcher[P]) told(dv *delivery) *delivery {
	if len(w.withheld) == 0 || dv.end != nil {
		return dv
	}
	var events []watch.Event // nil while they are dv's
	for i, ev := range dv.events {
		key := eventKey[P](ev)
		if _, ok := w.withheld[key]; !ok {
			if events != nil {
				events = append(events, ev)
			}
			continue
		}
		delete(w.withheld, key)
		if events == nil {
			events = append(make([]watch.Event, 0, len(dv.events)), dv.events[:i]...)
		}
		if ev.Type != watch.Deleted {
			events = append(events, watch.Event{Type: watch.Added, Object: ev.Object})
		}
	}
	if events == nil {
		return dv
	}
	return &delivery{rv: dv.rv, gen: dv.gen, cycle: dv.cycle, events: events}
}

// eventKey is the key of the object of a watch event: a build's item, or an object known by key alone.
func eventKey[P any](ev watch.Event) string {
	if it, ok := ev.Object.(*watchItem[P]); ok {
		return it.e.key()
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return ""
	}
	o := object{namespace: m.GetNamespace(), name: m.GetName()}
	return o.key()
}
