package api

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// watchKind is what one resource (nodes or pods) gives the watch loop, which is shared by both.
type watchKind struct {
	resource schema.GroupResource
	// list returns the objects of snap the watch selects, keyed by namespace/name, each stamped with rv.
	list func(snap points, rv string) (map[string]runtime.Object, error)
	// gone returns the keys of snap, within the watch's namespace and field selector, whose objects no longer
	// exist (deleted, or a pod no longer Running). A watch resuming from snap must still tell its client that they
	// left, though the informers that would give their labels have forgotten them.
	gone func(snap storage.Snapshot) []string
	// same reports whether two versions of an object carry the same metrics and labels.
	same func(a, b runtime.Object) bool
	// empty returns an object with only a key and a resourceVersion: bookmarks, and deletions known by key alone.
	empty func(key, rv string) runtime.Object
}

// startWatch validates a watch request and starts the goroutine that follows storage's snapshots for it.
//
// resourceVersion is a snapshot's generation. "" and "0" start with ADDED events for every selected object, as
// Kubernetes does; a retained generation resumes from what that snapshot held; anything else (older than the
// retained snapshots, or from another replica or an earlier run of this one) is 410 Gone, so the client lists again.
func startWatch(ctx context.Context, hub *watchHub, m MetricsReader, kind watchKind, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	v, ok := m.(Versioned)
	if !ok {
		return nil, apierrors.NewMethodNotSupported(kind.resource, "watch")
	}
	if err := unavailable(m); err != nil {
		return nil, err
	}
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	prev := map[string]runtime.Object{}
	switch rv := opts.ResourceVersion; {
	case rv == "" || rv == "0" || initial:
		if _, err := kind.list(v.Latest(), ""); err != nil { // selectors fail before the response turns into a stream
			return nil, err
		}
	default:
		gen, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q: not a resourceVersion of this API", rv))
		}
		snap, ok := v.At(gen)
		if !ok {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf(
				"too old resource version: %d (the newest is %d; %d collections are retained)",
				gen, v.Latest().Generation(), storage.RetainedViews))
		}
		if prev, err = kind.list(snap, rv); err != nil {
			return nil, err
		}
		for _, key := range kind.gone(snap) {
			if _, ok := prev[key]; !ok {
				prev[key] = nil
			}
		}
	}
	if err := hub.acquire(); err != nil {
		return nil, err
	}
	w := &metricsWatch{
		ctx: ctx, hub: hub, metrics: m, versioned: v, kind: kind,
		bookmarks: opts.AllowWatchBookmarks, initialEnd: initial && opts.AllowWatchBookmarks,
		result: make(chan watch.Event), done: make(chan struct{}),
	}
	go w.run(prev)
	return w, nil
}

// metricsWatch is one watch: a goroutine that, for every new snapshot, lists what the watch selects and sends the
// difference from the previous list. It holds at most two lists and sends while the client reads, so a slow client
// slows only its own watch and never makes it queue events.
type metricsWatch struct {
	ctx        context.Context
	hub        *watchHub
	metrics    MetricsReader
	versioned  Versioned
	kind       watchKind
	bookmarks  bool
	initialEnd bool // send the bookmark that ends the initial events (sendInitialEvents=true)

	result   chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
}

// ResultChan implements watch.Interface.
func (w *metricsWatch) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface.
func (w *metricsWatch) Stop() { w.stopOnce.Do(func() { close(w.done) }) }

func (w *metricsWatch) run(prev map[string]runtime.Object) {
	// Deferred in this order so the slot is free by the time the client sees the channel close.
	defer close(w.result)
	defer w.hub.release()
	// The first round compares the starting snapshot's list with the newest snapshot: ADDED events for everything
	// when starting fresh, what changed since when resuming.
	snap := w.versioned.Latest()
	for {
		rv := strconv.FormatUint(snap.Generation(), 10)
		cur, err := w.kind.list(snap, rv)
		if err != nil {
			klog.ErrorS(err, "Ending a watch: listing failed", "resource", w.kind.resource.String())
			w.send(watch.Event{Type: watch.Error, Object: statusOf(err)})
			return
		}
		sent, ok := w.sendDiff(prev, cur, rv)
		if !ok {
			return
		}
		if w.initialEnd {
			w.initialEnd = false
			b := w.kind.empty("", rv)
			if a, err := meta.Accessor(b); err == nil {
				a.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			}
			if !w.send(watch.Event{Type: watch.Bookmark, Object: b}) {
				return
			}
		} else if sent == 0 && w.bookmarks && !w.send(watch.Event{Type: watch.Bookmark, Object: w.kind.empty("", rv)}) {
			return
		}
		prev = cur
		select {
		case <-snap.Changed():
		case <-w.done:
			return
		case <-w.ctx.Done():
			return
		case <-w.hub.stopping:
			return
		}
		snap = w.versioned.Latest()
		// A source that has failed for longer than --stale-after ends the watch with the 503 a list would get,
		// rather than a silent DELETED for every object.
		if err := unavailable(w.metrics); err != nil {
			w.send(watch.Event{Type: watch.Error, Object: statusOf(err)})
			return
		}
	}
}

// sendDiff sends ADDED, MODIFIED and DELETED events that turn prev into cur. A nil object in prev is one known by
// key only (see watchKind.gone).
func (w *metricsWatch) sendDiff(prev, cur map[string]runtime.Object, rv string) (int, bool) {
	sent := 0
	for key, obj := range cur {
		old, had := prev[key]
		switch {
		case !had:
			if !w.send(watch.Event{Type: watch.Added, Object: obj}) {
				return sent, false
			}
		case old == nil || !w.kind.same(old, obj):
			if !w.send(watch.Event{Type: watch.Modified, Object: obj}) {
				return sent, false
			}
		default:
			continue
		}
		sent++
	}
	for key, old := range prev {
		if _, ok := cur[key]; ok {
			continue
		}
		var obj runtime.Object
		if old == nil {
			obj = w.kind.empty(key, rv)
		} else {
			// A copy: the previous event may still be being encoded.
			obj = old.DeepCopyObject()
			if a, err := meta.Accessor(obj); err == nil {
				a.SetResourceVersion(rv)
			}
		}
		if !w.send(watch.Event{Type: watch.Deleted, Object: obj}) {
			return sent, false
		}
		sent++
	}
	return sent, true
}

// send delivers ev unless the watch ends first.
func (w *metricsWatch) send(ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-w.done:
	case <-w.ctx.Done():
	case <-w.hub.stopping:
	}
	return false
}

// statusOf is the Status a watch.Error event carries.
func statusOf(err error) *metav1.Status {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return &st
	}
	return &apierrors.NewInternalError(err).ErrStatus
}
