package api

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// maxWatchLag is how many collection cycles' deliveries a watcher may have queued before it is ended with 410 Gone and
// its client lists again: a client that stopped reading gives its slot back within a minute at the default
// resolution, and never blocks the others (what it has queued meanwhile is charged to its user, keeper). Lag
// counts cycles, not deliveries: a cycle longer than a second publishes several (storage's Cycle.Publish), each with
// part of its events.
const maxWatchLag = 4

// maxQueuedDeliveries bounds a watcher's queue in deliveries too, whatever the cycles: 16 publications per cycle is a
// cycle of 16 s or more.
const maxQueuedDeliveries = 16 * maxWatchLag

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
			if from, ok = s.snaps.Resolve(v.gen); !ok {
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
	if from == nil || from.Generation() < start.generation {
		start, w.withheld = s.current(start)
	}
	switch {
	case from == nil:
		_, added := start.watchItems()
		w.initial = &delivery{rv: added.rv, events: added.events} // its own: charged to this watch's feed
	case from.Generation() >= start.generation:
		// The client is ahead of the feed, which has yet to take in the newest collection: nothing to send until
		// the feed gets past where the client is.
		w.initial, w.skipThrough = &delivery{rv: s.rv(from), gen: from.Generation()}, from.Generation()
	default:
		prev, err := s.builds.get(ctx, from, which)
		if err != nil {
			return nil, err
		}
		w.initial = diff(prev.entries, start, s.deleted(from, which), nil)
	}
	if !f.charge(w.initial) {
		return nil, overBudget(user)
	}
	started = true
	go w.run()
	return w, nil
}

// overBudget is the 429 of a watch the keeper has no room for: what user's watches and builds keep is at its share
// of --reader-cache-bytes, and making room did not help.
func overBudget(user string) error {
	return apierrors.NewTooManyRequests(fmt.Sprintf(
		"the server keeps too much for user %q's watches (--reader-cache-bytes)", user), 1)
}

// statusOf is the Status a watch.Error event carries.
func statusOf(err error) *metav1.Status {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return &st
	}
	return &apierrors.NewInternalError(err).ErrStatus
}
