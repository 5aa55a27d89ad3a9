package api

import (
	"context"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Readers share work per snapshot (DESIGN.md section 3, "Readers' cost"): every list, page and watch of one
// snapshot with the same namespace and selectors shares one build. A build is the selection's sorted entries (the
// key index: a few words per object), from which a full list builds its items only to encode them, once per wire
// format, and keeps the encodings (leanlist.go), a page builds only its own items, and watches build their events'
// objects once, encoded once per format and written to every watcher. Which objects exist is as the informers saw
// them when the build was made: a build listed before a later deletion (storage's Removals) is not shared with the
// requests that come after it, when it lists the deleted object.

// scope is what a build is shared by: a namespace ("" for all, or a cluster-scoped kind) and selectors. given is
// the request's own label selector when its essential one (essential.go) is shorter; it is not part of the key.
type scope struct {
	namespace string
	selectors
	given labels.Selector
}

func (s scope) key() string {
	var l, f string
	if s.labels != nil {
		l = s.labels.String()
	}
	if s.fields != nil {
		f = s.fields.String()
	}
	return s.namespace + "\x00" + l + "\x00" + f
}

// build is one selection of one snapshot: its sorted entries, and what its readers share made from them, each part
// with its own lock, each letting go of itself (letGo) when the build sheds it: the full list (fulllist.go), the
// pages (paginate.go) and the watch events (watchitem.go). The cache of builds is buildcache.go. entries is set
// before done is closed and never changes after.
type build[P any] struct {
	res        *metricsREST[P]
	key        string // the selection's, in its generation's builds
	rv         string // "" for storage without snapshots
	generation uint64 // rv as a number
	created    metav1.Time
	entries    []entry[P] // sorted by (namespace,) name
	// removals is storage's Removals read before its objects were listed: an object deleted once the count grew
	// past it may be among its entries, so it is not shared with requests that come after that (get) unless it
	// lists none of the objects removed since (stale); checked is the count up to which it was found to list none.
	removals uint64
	checked  atomic.Uint64
	// set fingerprints the selection's objects; same, when set, is the kept build of the same objects (buildshare.go)
	// that this selection reads instead of its own entries. Both set before done is closed.
	set  objectSet
	same *build[P]
	done chan struct{}
	err  error
	// shared says the build is kept in the cache, so its full list, pages and watch events are shared and charged
	// to keep; otherwise it is one request's (and its waiters') alone. Set before done is closed.
	shared bool
	keep   kept

	full   fullList       // until the next collection lands
	pages  pageCache      // the newest pages, while the build is kept
	events buildEvents[P] // made for the first watch that needs them, until the next collection lands
}

// shed lets go of what the build shares beyond its entries: its full list, watch events and pages. Requests that
// still have them encode them uncharged: the build's account no longer counts them (keeper.shrink, forget).
func (b *build[P]) shed() {
	b.full.letGo()
	b.events.letGo()
	b.pages.letGo()
}

// read is the build b's requests read: b, or the build of the same objects it found (same).
func (b *build[P]) read() *build[P] {
	if b.same != nil {
		return b.same
	}
	return b
}

// fill makes b's entries: sel's objects at snap, in a slot of buildLimit; or, when sameAs finds a kept build of
// those objects, sets b.same to it instead.
func (b *build[P]) fill(ctx context.Context, s *metricsREST[P], snap storage.Snapshot, sel scope,
	sameAs func(objs []object) *build[P]) error {
	release, err := s.limit.take(ctx, upTo(s.kind, sel))
	if err != nil {
		return err
	}
	defer release()
	objs, err := s.kind.objects(sel.namespace, sel.labels)
	if err != nil {
		return err
	}
	objs = slices.DeleteFunc(objs, func(o object) bool { return !sel.matchFields(o.namespace, o.name) })
	if b.same = sameAs(objs); b.same != nil {
		return nil
	}
	now := s.now()
	es := make([]entry[P], 0, len(objs))
	for _, o := range objs {
		if p, ok := s.kind.point(snap, &o); ok {
			es = append(es, entry[P]{object: o, point: p})
			// Observed once per build, not per request: observations per request of one histogram cost more CPU
			// than serving the shared bytes (BENCHMARKS.md, "Figures behind the comments").
			observeFreshness(now.Time, pointTime(p))
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].less(&es[j].object) })
	buildsMade.Inc()
	b.res, b.rv, b.generation, b.created, b.entries = s, s.rv(snap), snap.Generation(), now, es
	return nil
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// pointTime is when a point was sampled.
func pointTime(p any) time.Time {
	switch p := p.(type) {
	case storage.NodePoint:
		return p.Timestamp
	case storage.PodPoint:
		return p.Timestamp
	}
	return time.Time{}
}
