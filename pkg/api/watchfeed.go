package api

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// feeds are the watch feeds of one resource, one per selection being watched.
type watchFeeds[P any] struct {
	res   *metricsREST[P]
	mu    sync.Mutex
	bySel map[string]*watchFeed[P]
}

func newFeeds[P any](res *metricsREST[P]) *watchFeeds[P] {
	return &watchFeeds[P]{res: res, bySel: map[string]*watchFeed[P]{}}
}

// feed follows storage's snapshots for every watcher of one selection: for each new snapshot it takes the
// selection's shared build, computes the events from the previous one once, and queues that delivery to every
// watcher. Its goroutine runs while it has watchers. What it holds (the build it leads from, whether or not the
// build cache still keeps it, and each delivery until every watcher has sent it, with its encodings) is charged to
// the users watching it (keeper): a user over its share has its watches of the feed ended with 410 Gone, so one
// user's many watches, or slow ones, cost that user's share of the budget, not the server's memory.
type watchFeed[P any] struct {
	res  *metricsREST[P]
	sel  scope
	key  string
	refs int // watchers joined or joining; guarded by feeds.mu
	gone bool

	ctx  context.Context
	stop context.CancelFunc

	keep kept // held by the users of its watchers

	mu       sync.Mutex
	cur      *build[P] // the build the newest delivery led to; nil until the first watcher made it
	base     int64     // what keep is charged for cur's entries
	ended    *delivery // the delivery that ended the feed's watchers, for any that join after it
	snap     storage.Snapshot
	handle   *storage.Handle // on snap: a client of the selection resumes from where its watchers are
	watchers map[*watcher[P]]struct{}
	users    map[string]int // watchers by user
}

// join adds w to the feed of its selection, starting the feed when it is the first, and returns the build w
// starts from: w is queued every delivery after it.
func (fs *watchFeeds[P]) join(ctx context.Context, w *watcher[P], sel scope) (*watchFeed[P], *build[P], error) {
	key := sel.key()
	fs.mu.Lock()
	f := fs.bySel[key]
	if f == nil || f.gone {
		f = &watchFeed[P]{res: fs.res, sel: sel, key: key, watchers: map[*watcher[P]]struct{}{}, users: map[string]int{}}
		f.keep = kept{user: w.user, drop: f.dropped, live: true}
		f.ctx, f.stop = context.WithCancel(patient(context.Background()))
		fs.bySel[key] = f
	}
	f.refs++
	fs.mu.Unlock()
	joined := false
	defer func() { // also when building panics
		if !joined {
			fs.leave(f)
		}
	}()

	f.mu.Lock()
	defer f.mu.Unlock()
	kp := fs.res.builds.keeper
	kp.hold(&f.keep, w.user)
	f.users[w.user]++
	if f.cur == nil {
		snap := fs.res.snaps.Latest()
		b, err := fs.res.builds.get(ctx, snap, sel)
		if err != nil {
			f.leaveUser(w.user)
			return nil, nil, err
		}
		f.cur, f.snap = b, snap
		f.handle, _ = fs.res.snaps.Hold(snap)
		led := f.lead(b)
		go f.run() // ends with the feed's last watcher: this one, when the feed could not be charged
		if !led {
			f.leaveUser(w.user)
			return nil, nil, overBudget(w.user)
		}
	}
	f.watchers[w] = struct{}{}
	if f.ended != nil {
		w.push(f.ended)
	}
	joined = true
	return f, f.cur, nil
}

// leave drops one reference to f; the last one stops it.
func (fs *watchFeeds[P]) leave(f *watchFeed[P]) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.refs--; f.refs == 0 {
		fs.retire(f)
		f.stop()
	}
}

// retire marks f gone and takes it off the map: new watchers of its selection start a new feed. fs.mu is held.
func (fs *watchFeeds[P]) retire(f *watchFeed[P]) {
	f.gone = true
	if fs.bySel[f.key] == f {
		delete(fs.bySel, f.key)
	}
}

// remove takes w off the feed.
func (f *watchFeed[P]) remove(w *watcher[P]) {
	f.mu.Lock()
	delete(f.watchers, w)
	f.leaveUser(w.user)
	f.mu.Unlock()
	f.res.feeds.leave(f)
}

// leaveUser counts one watcher of user fewer: its last lets go of the feed. f.mu is held.
func (f *watchFeed[P]) leaveUser(user string) {
	if f.users[user]--; f.users[user] <= 0 {
		delete(f.users, user)
		f.res.builds.keeper.unhold(&f.keep, user)
	}
}

// lead charges the feed for leading from b, in place of the build it led from: its entries stay while the feed
// holds b, whether or not the build cache keeps b. False when the keeper has no room: the feed must end.
// f.mu is held.
func (f *watchFeed[P]) lead(b *build[P]) bool {
	kp := f.res.builds.keeper
	kp.refund(&f.keep, f.base)
	f.base = entryBytes(b.entries)
	return kp.admit(&f.keep, f.base)
}

// charge charges dv, a watch's initial events, to the feed until it is sent; false when the keeper has no room.
func (f *watchFeed[P]) charge(dv *delivery) bool {
	kp := f.res.builds.keeper
	n := eventBytes(len(dv.events))
	if !kp.admit(&f.keep, n) {
		return false
	}
	dv.acct = &deliveryAccount{kp: kp, k: &f.keep, refs: 1}
	dv.acct.add(n)
	return true
}

// dropped ends the watches of user, which was made to let go of the feed to keep readers within their budget;
// all of them when last.
func (f *watchFeed[P]) dropped(user string, last bool) {
	dv := &delivery{drop: true, end: statusOf(apierrors.NewResourceExpired(
		"the server keeps too much for this user's watches (--reader-cache-bytes): list again"))}
	if last {
		f.publish(dv, nil, nil)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for w := range f.watchers {
		if w.user == user {
			w.push(dv)
		}
	}
}

// anyUser is one of the users watching, whom the feed's builds are made for (the others then hold them too).
func (f *watchFeed[P]) anyUser() (string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	users := make([]string, 0, len(f.users))
	for u := range f.users {
		users = append(users, u)
	}
	sort.Strings(users)
	if len(users) == 0 {
		return "", nil
	}
	return users[0], users
}

// run follows the snapshots until the feed has no watchers, the server shuts down, or the feed ends them all.
func (f *watchFeed[P]) run() {
	defer func() {
		f.mu.Lock()
		f.handle.Release()
		f.mu.Unlock()
	}()
	defer func() {
		if r := recover(); r != nil {
			watchPanics.Inc()
			err := fmt.Errorf("watch feed panicked: %v", r)
			klog.ErrorS(err, "Ending the watches of a selection", "resource", f.res.info.resource.String(),
				"stack", string(debug.Stack()))
			f.publish(&delivery{end: statusOf(apierrors.NewInternalError(err))}, nil, nil)
		}
	}()
	for {
		select {
		case <-f.snap.Changed():
		case <-f.ctx.Done():
			return
		case <-f.res.watches.stopping:
			return
		}
		snap := f.res.snaps.Latest()
		// A source that has failed for longer than --stale-after ends the watches with the 503 a list would get,
		// rather than a silent DELETED for every object.
		if err := unavailable(snap); err != nil {
			f.publish(&delivery{end: statusOf(err)}, nil, nil)
			return
		}
		first, users := f.anyUser()
		next, err := f.res.builds.get(genericapirequest.WithUser(f.ctx, &user.DefaultInfo{Name: first}), snap, f.sel)
		if err != nil {
			if f.ctx.Err() != nil {
				return
			}
			klog.ErrorS(err, "Ending the watches of a selection: listing failed", "resource", f.res.info.resource.String())
			f.publish(&delivery{end: statusOf(err)}, nil, nil)
			return
		}
		kp := f.res.builds.keeper
		for _, u := range users {
			kp.hold(&next.keep, u)
		}
		f.mu.Lock()
		for u := range f.users { // used now: its users' least recently used things go before it
			kp.hold(&f.keep, u)
		}
		prev := f.cur
		led := f.lead(next)
		f.mu.Unlock()
		dv := diff(prev.entries, next, nil, &deliveryAccount{kp: kp, k: &f.keep, refs: 1})
		dv.cycle = snap.Health().Cycles
		if !led || !kp.admit(&f.keep, eventBytes(len(dv.events))) {
			dv.release()
			f.dropped("", true)
			return
		}
		dv.acct.add(eventBytes(len(dv.events)))
		f.publish(dv, next, snap)
		dv.release() // the feed's own reference: the watchers that queued it hold theirs
	}
}

// publish queues dv to every watcher and makes next the feed's build; a delivery that ends the watches ends the feed.
func (f *watchFeed[P]) publish(dv *delivery, next *build[P], snap storage.Snapshot) {
	if dv.end != nil {
		f.res.feeds.mu.Lock()
		f.res.feeds.retire(f)
		f.res.feeds.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if dv.end != nil {
		f.ended = dv
	}
	if next != nil {
		f.handle.Release()
		f.cur, f.snap = next, snap
		f.handle, _ = f.res.snaps.Hold(snap)
	}
	for w := range f.watchers {
		w.push(dv)
	}
}
