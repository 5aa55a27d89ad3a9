package api

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// maxWatchLag is how many collection cycles' batches a watcher may have queued. One further behind could not resume
// from where it is anyway (storage keeps the snapshots of the newest storage.RetainedViews publications, and cycles'
// ends only while a reader pins them), so it is ended with 410 Gone and its client lists again: a slow client never
// blocks the others nor holds more than this many cycles' events. Lag counts cycles, not batches: a cycle longer
// than a second publishes several (storage's Cycle.Publish), each with part of its events.
const maxWatchLag = storage.RetainedViews

// maxQueuedBatches bounds a watcher's queue in batches too, whatever the cycles: 16 publications per cycle is a
// cycle of 16 s or more.
const maxQueuedBatches = 16 * maxWatchLag

// resultBuffer lets the apiserver's watch handler write several events before it flushes.
const resultBuffer = 128

// startWatch validates a watch request, takes its slot, and joins the feed of its selection.
//
// resourceVersion names a snapshot of this run (resourceversion.go). "" and "0" start with ADDED events for every
// selected object, as Kubernetes does; a retained snapshot's resumes from what that snapshot held; any other
// (older than the retained snapshots, or of another replica or an earlier run of this one, whatever its number) is
// 410 Gone, so the client lists again.
// The watch limits are checked before any build is made for the request.
func (s *metricsREST[P]) startWatch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	latest, sel, err := s.begin(opts)
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &metainternalversion.ListOptions{}
	}
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	var from storage.Snapshot // nil: start with ADDED for everything
	if rv := opts.ResourceVersion; rv != "" && rv != "0" {
		v, err := parseVersion(rv)
		switch {
		case err != nil:
			return nil, apierrors.NewBadRequest(err.Error())
		case initial: // the initial events are the newest snapshot's, not older than any
		case !s.ours(v):
			return nil, notOurs(rv)
		case v.gen > latest.Generation(): // as a list answers it: the client lists again from the newest
			return nil, tooLarge(v, latest)
		default:
			var ok bool
			if from, ok = s.snaps.At(v.gen); !ok {
				return nil, tooOld(v, latest)
			}
		}
	}
	user, version := userOf(ctx), requestVersion(ctx)
	if err := s.watches.acquire(user, version); err != nil {
		return nil, err
	}
	w := &watcher[P]{
		res: s, ctx: ctx, user: user, version: version,
		bookmarks: opts.AllowWatchBookmarks, initialEnd: initial && opts.AllowWatchBookmarks,
		wake: make(chan struct{}, 1), result: make(chan watch.Event, resultBuffer), done: make(chan struct{}),
		abort: make(chan struct{}),
	}
	started := false
	defer func() { // also when building panics
		if !started {
			if w.feed != nil {
				w.feed.remove(w)
			}
			s.watches.release(user, version)
		}
	}()
	which := s.selection(ctx, sel)
	f, start, err := s.feeds.join(ctx, w, which)
	if err != nil {
		return nil, err
	}
	w.feed, w.startRV = f, start.rv
	switch {
	case from == nil:
		_, added := start.watchItems()
		w.initial = &batch{rv: added.rv, events: added.events} // its own: charged to this watch's feed
	case from.Generation() >= start.generation:
		// The client is ahead of the feed, which has yet to take in the newest collection: nothing to send until
		// the feed gets past where the client is.
		w.initial, w.skipThrough = &batch{rv: s.rv(from), gen: from.Generation()}, from.Generation()
	default:
		prev, err := s.builds.get(ctx, from, which)
		if err != nil {
			return nil, err
		}
		w.initial = diff(prev.entries, start, s.gone(from, which), nil)
	}
	if !f.charge(w.initial) {
		return nil, apierrors.NewTooManyRequests(fmt.Sprintf(
			"the server keeps too much for user %q's watches (--reader-cache-bytes)", user), 1)
	}
	started = true
	go w.run()
	return w, nil
}

// watcher is one watch: a goroutine that sends its initial events, then the batches its feed queues, while the
// client reads. The batches are shared with every watcher of the selection.
type watcher[P any] struct {
	res        *metricsREST[P]
	ctx        context.Context
	user       string
	version    string // the API version the client watches, for the metrics
	feed       *watchFeed[P]
	startRV    string // the resourceVersion the watch starts at
	initial    *batch
	bookmarks  bool
	initialEnd bool // send the bookmark that ends the initial events (sendInitialEvents=true)
	// skipThrough is the generation the client already has when it resumed ahead of the feed.
	skipThrough uint64

	mu       sync.Mutex
	queue    []*batch // each held (batch.hold) until sent or let go
	fellBack bool
	ended    bool // the watch ended: nothing more is queued
	wake     chan struct{}
	// cut is the batch that ends the watch at once (batch.drop), abort closed with it: a watch blocked sending to a
	// client that does not read lets go of what it holds too.
	cut   *batch
	abort chan struct{}

	result   chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
}

// ResultChan implements watch.Interface.
func (w *watcher[P]) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface.
func (w *watcher[P]) Stop() { w.stopOnce.Do(func() { close(w.done) }) }

// push queues a batch; called by the feed, which never waits for a watcher.
func (w *watcher[P]) push(bt *batch) {
	w.mu.Lock()
	var let []*batch // what the watcher no longer holds
	switch {
	case w.fellBack || w.ended:
	case bt.end == nil && (len(w.queue) >= maxQueuedBatches ||
		(len(w.queue) > 0 && bt.cycle >= w.queue[0].cycle+maxWatchLag)):
		w.fellBack, w.queue, let = true, nil, w.queue
		watchesFellBehind.WithLabelValues(w.version).Inc()
	case bt.drop:
		w.queue, let = nil, w.queue
		if w.cut == nil {
			w.cut = bt
			close(w.abort)
			watchesOverBudget.WithLabelValues(w.version).Inc()
		}
	default:
		bt.hold()
		w.queue = append(w.queue, bt)
	}
	w.mu.Unlock()
	for _, bt := range let {
		bt.release()
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher[P]) run() {
	// Deferred in this order so the slot is free by the time the client sees the channel close.
	defer close(w.result)
	defer w.res.watches.release(w.user, w.version)
	defer w.letGo() // once off the feed: nothing more is queued
	defer w.feed.remove(w)
	defer func() {
		if r := recover(); r != nil {
			watchPanics.Inc()
			err := fmt.Errorf("watch panicked: %v", r)
			klog.ErrorS(err, "Ending a watch", "resource", w.res.info.resource.String(), "stack", string(debug.Stack()))
			w.send(watch.Event{Type: watch.Error, Object: statusOf(apierrors.NewInternalError(err))})
		}
	}()
	w.serve()
	w.mu.Lock()
	cut := w.cut
	w.mu.Unlock()
	if cut != nil { // the client is told, however slowly it reads; nothing else is held meanwhile
		for drained := false; !drained; { // events it has yet to read are moot: it lists again
			select {
			case <-w.result:
			default:
				drained = true
			}
		}
		st := *cut.end
		select {
		case w.result <- watch.Event{Type: watch.Error, Object: &st}:
		case <-w.done:
		case <-w.ctx.Done():
		case <-w.res.watches.stopping:
		}
	}
}

// serve sends the initial events, then the batches queued, until the watch ends.
func (w *watcher[P]) serve() {
	sent := w.sendBatch(w.initial, !w.initialEnd)
	w.initial.release()
	w.initial = nil
	if !sent {
		return
	}
	if w.initialEnd {
		b := w.res.kind.empty("", "", w.startRV)
		if a, err := meta.Accessor(b); err == nil {
			a.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
		if !w.send(watch.Event{Type: watch.Bookmark, Object: b}) {
			return
		}
	}
	for {
		select {
		case <-w.wake:
		case <-w.done:
			return
		case <-w.ctx.Done():
			return
		case <-w.res.watches.stopping:
			return
		case <-w.abort:
			return
		}
		w.mu.Lock()
		queue, fellBack := w.queue, w.fellBack
		w.queue = nil
		w.mu.Unlock()
		if fellBack {
			w.send(watch.Event{Type: watch.Error, Object: statusOf(apierrors.NewResourceExpired(fmt.Sprintf(
				"the watch fell more than %d collections behind: list again", maxWatchLag)))})
			return
		}
		for i, bt := range queue {
			ok := (bt.end == nil && bt.gen <= w.skipThrough) || w.sendBatch(bt, true)
			bt.release()
			if !ok {
				for _, rest := range queue[i+1:] {
					rest.release()
				}
				return
			}
		}
	}
}

// letGo lets go of the batches still queued when the watch ends.
func (w *watcher[P]) letGo() {
	w.mu.Lock()
	queue := w.queue
	w.queue, w.ended = nil, true
	w.mu.Unlock()
	for _, bt := range queue {
		bt.release()
	}
}

// sendBatch sends a batch's events, or its bookmark when it has none and bookmark is true; false ends the watch.
func (w *watcher[P]) sendBatch(bt *batch, bookmark bool) bool {
	if bt.end != nil {
		st := *bt.end // each its own: encoding sets an unversioned object's kind
		w.send(watch.Event{Type: watch.Error, Object: &st})
		return false
	}
	for _, ev := range bt.events {
		if !w.send(ev) {
			return false
		}
	}
	if len(bt.events) == 0 && bookmark && w.bookmarks {
		return w.send(watch.Event{Type: watch.Bookmark, Object: w.res.kind.empty("", "", bt.rv)})
	}
	return true
}

// send delivers ev unless the watch ends first.
func (w *watcher[P]) send(ev watch.Event) bool {
	select { // while the handler keeps up, a plain send: a collection is tens of thousands of events per watcher
	case w.result <- ev:
		return true
	default:
	}
	select {
	case w.result <- ev:
		return true
	case <-w.done:
	case <-w.ctx.Done():
	case <-w.res.watches.stopping:
	case <-w.abort:
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
