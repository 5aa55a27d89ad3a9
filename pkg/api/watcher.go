package api

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// watcher is one watch: a goroutine that sends its initial events, then the deliveries its feed queues, while the
// client reads. The deliveries are shared with every watcher of the selection.
type watcher[P any] struct {
	res        *metricsREST[P]
	ctx        context.Context
	user       string
	version    string // the API version the client watches, for the metrics
	feed       *watchFeed[P]
	startRV    string // the resourceVersion the watch starts at
	initial    *delivery
	bookmarks  bool
	initialEnd bool // send the bookmark that ends the initial events (sendInitialEvents=true)
	// skipThrough is the generation the client already has when it resumed ahead of the feed.
	skipThrough uint64
	// withheld are the keys of objects deleted before the watch joined that its feed has yet to say went: their
	// DELETED is not sent (watchremovals.go). Read and written by its goroutine only.
	withheld map[string]struct{}

	mu       sync.Mutex
	queue    []*delivery // each referenced (delivery.ref) until sent or dropped
	fellBack bool
	ended    bool // the watch ended: nothing more is queued
	wake     chan struct{}
	// cut is the delivery that ends the watch at once (delivery.drop), abort closed with it: a watch blocked sending to a
	// client that does not read releases what it has queued too.
	cut   *delivery
	abort chan struct{}

	result   chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
}

// ResultChan implements watch.Interface.
func (w *watcher[P]) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface.
func (w *watcher[P]) Stop() { w.stopOnce.Do(func() { close(w.done) }) }

// push queues a delivery; called by the feed, which never waits for a watcher.
func (w *watcher[P]) push(dv *delivery) {
	w.mu.Lock()
	var dropped []*delivery // what the watcher no longer has queued
	switch {
	case w.fellBack || w.ended:
	case dv.end == nil && (len(w.queue) >= maxQueuedDeliveries ||
		(len(w.queue) > 0 && dv.cycle >= w.queue[0].cycle+maxWatchLag)):
		w.fellBack, w.queue, dropped = true, nil, w.queue
		watchesFellBehind.WithLabelValues(w.version).Inc()
	case dv.drop: // ended: nothing more is queued while the client is told, however slowly it reads
		w.queue, w.ended, dropped = nil, true, w.queue
		if w.cut == nil {
			w.cut = dv
			close(w.abort)
			watchesOverBudget.WithLabelValues(w.version).Inc()
		}
	default:
		dv.ref()
		w.queue = append(w.queue, dv)
	}
	w.mu.Unlock()
	for _, dv := range dropped {
		dv.release()
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
	defer w.releaseQueue() // once off the feed: nothing more is queued
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
	if cut != nil { // the client is told, however slowly it reads; nothing else is queued meanwhile
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

// serve sends the initial events, then the deliveries queued, until the watch ends.
func (w *watcher[P]) serve() {
	sent := w.sendDelivery(w.initial, !w.initialEnd)
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
		for i, dv := range queue {
			ok := (dv.end == nil && dv.gen <= w.skipThrough) || w.sendDelivery(w.told(dv), true)
			dv.release()
			if !ok {
				for _, rest := range queue[i+1:] {
					rest.release()
				}
				return
			}
		}
	}
}

// releaseQueue releases the deliveries still queued when the watch ends.
func (w *watcher[P]) releaseQueue() {
	w.mu.Lock()
	queue := w.queue
	w.queue, w.ended = nil, true
	w.mu.Unlock()
	for _, dv := range queue {
		dv.release()
	}
}

// sendDelivery sends a delivery's events, or its bookmark when it has none and bookmark is true; false ends the watch.
func (w *watcher[P]) sendDelivery(dv *delivery, bookmark bool) bool {
	if dv.end != nil {
		st := *dv.end // each its own: encoding sets an unversioned object's kind
		w.send(watch.Event{Type: watch.Error, Object: &st})
		return false
	}
	for _, ev := range dv.events {
		if !w.send(ev) {
			return false
		}
	}
	if len(dv.events) == 0 && bookmark && w.bookmarks {
		return w.send(watch.Event{Type: watch.Bookmark, Object: w.res.kind.empty("", "", dv.rv)})
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
