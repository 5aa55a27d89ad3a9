package api

import (
	"io"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// watchItem is one object of a build as watch events carry it: shared by every watcher of the selection, encoded
// once per wire format and event type (the apiserver's watch encoder caches the whole framed event through
// runtime.CacheableObject). It keeps its entry, not the built object: the object is built only to encode, so a
// collection's events for every pod cost their encodings, not tens of megabytes of objects.
type watchItem[P any] struct {
	res     *metricsREST[P]
	e       *entry[P]
	rv      string
	created metav1.Time
	enc     encodings
}

func (i *watchItem[P]) object() runtime.Object { return i.res.kind.item(i.e, i.rv, i.created) }

// GetObjectKind implements runtime.Object.
func (i *watchItem[P]) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object: the object, built anew.
func (i *watchItem[P]) DeepCopyObject() runtime.Object { return i.object() }

// CacheEncode implements runtime.CacheableObject.
func (i *watchItem[P]) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	return i.enc.cacheEncode(i.object, nil, id, encode, w)
}

// GetObject implements runtime.CacheableObject.
func (i *watchItem[P]) GetObject() runtime.Object { return i.object() }

var _ runtime.CacheableObject = &watchItem[struct{}]{}

// deliveryItems returns the entry at an index as a feed's delivery carries it: made for the delivery, its encodings
// charged to acct. Without acct (a delivery of one watch), the build's own (watchItems).
func (b *build[P]) deliveryItems(acct *deliveryAccount) func(int) *watchItem[P] {
	if acct == nil {
		items, _ := b.watchItems()
		return func(i int) *watchItem[P] { return items[i] }
	}
	return func(i int) *watchItem[P] {
		item := &watchItem[P]{res: b.res, e: &b.entries[i], rv: b.rv, created: b.created}
		item.enc.charge = acct.charge
		return item
	}
}

// buildEvents are a build's entries as watch events carry them, made for the first watch that needs them and kept,
// charged to the build, when the keeper has room; like the full list, let go of (letGo) once a newer collection lands
// (feeds and queued deliveries keep what they still send).
type buildEvents[P any] struct {
	mu    sync.Mutex
	items []*watchItem[P]
	added *delivery // ADDED for every entry: the initial events of a watch starting here; nil until kept
	kept  *shared   // what they are charged
}

// letGo lets go of the events: watches that still have them encode them uncharged.
func (e *buildEvents[P]) letGo() {
	e.mu.Lock()
	if e.kept != nil {
		e.kept.letGo()
	}
	e.items, e.added, e.kept = nil, nil, nil
	e.mu.Unlock()
}

// watchItems returns the entries as watch events carry them, and the ADDED delivery of a watch starting here: kept in
// b.events, charged to b, when b is kept and the keeper has room, else made for this caller alone.
func (b *build[P]) watchItems() ([]*watchItem[P], *delivery) {
	e := &b.events
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.added != nil {
		return e.items, e.added
	}
	kp := b.res.builds.keeper
	n := eventBytes(len(b.entries))
	var charge func(int)
	var kept *shared
	if b.shared && kp.admit(&b.keep, n) {
		kept = &shared{bytes: n}
		charge = func(n int) { kept.charge(kp, &b.keep, int64(n)) }
	}
	items := make([]*watchItem[P], len(b.entries))
	events := make([]watch.Event, len(b.entries))
	for i := range b.entries {
		items[i] = &watchItem[P]{res: b.res, e: &b.entries[i], rv: b.rv, created: b.created}
		items[i].enc.charge = charge
		events[i] = watch.Event{Type: watch.Added, Object: items[i]}
	}
	added := &delivery{rv: b.rv, events: events}
	if kept != nil {
		e.items, e.added, e.kept = items, added, kept
	}
	return items, added
}
