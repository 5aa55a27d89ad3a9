package api

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// defaultBuildWait is how long a request waits for a build slot before it is answered 429 Too Many Requests.
const defaultBuildWait = 5 * time.Second

// smallBuild is the most items a build, list or page may have and take no slot: its cost is that of a page
// (smallPage), and the HPA controller, one identity for every HPA of the cluster, lists small selections that
// must never queue behind large ones. Size protects it, where fairness between users cannot.
const smallBuild = smallPage

// buildLimit bounds the large builds running at once (lists, pages and watch events made from a snapshot), a few
// per core: they are CPU and memory, and a reader that asks for many distinct selections at once must not take
// the server's memory with it. A build of at most smallBuild items takes no slot. Requests waiting for a slot are
// served user by user, the user whose builds held slots least first, so one user's flood delays another user's
// large list by about one build; a user already waiting with maxWaiting requests is answered 429 at once, and
// any other request waits within its context, at most wait, then gets 429 with Retry-After. Watches' own builds
// (the events of a new collection) wait as long as it takes.
type buildLimit struct {
	slots int
	small int // the most items taking no slot
	wait  time.Duration
	after func(time.Duration) <-chan time.Time
	now   func() time.Time

	epoch time.Time

	mu       sync.Mutex
	running  int
	queued   int                  // requests waiting for a slot, all users
	arrivals uint64               // requests that waited, to order them
	users    map[string]*slotUser // users running, waiting, or waiting on another request's build
}

// slotUser is one user's share of the slots while it has builds running or waiting.
type slotUser struct {
	used    time.Duration // slot time of its builds done since it came (see user)
	running int
	started time.Duration // the sum of its running builds' start times (clock)
	waiting []*slotWaiter // first come first
	blocked int           // requests waiting on another request's build (await, lock)
}

type slotWaiter struct {
	ready   chan struct{}
	granted bool
	start   time.Duration // when granted (clock)
	order   uint64        // arrival, to break ties
}

// newBuildLimit allows n large builds at once; 0 means twice GOMAXPROCS.
func newBuildLimit(n int) *buildLimit {
	if n <= 0 {
		n = 2 * runtime.GOMAXPROCS(0)
	}
	return &buildLimit{slots: n, small: smallBuild, wait: defaultBuildWait, after: time.After, now: time.Now,
		epoch: time.Now(), users: map[string]*slotUser{}}
}

// minWaiting is the fewest requests one user may have waiting, for slots and others' builds, or for answers' room.
const minWaiting = 32

// maxWaiting is how many requests one user may have waiting, for slots and for others' builds: beyond, 429 at once.
func (l *buildLimit) maxWaiting() int { return max(8*l.slots, minWaiting) }

type patientKey struct{}

// patient marks ctx as a build that waits for a slot without the 429: the events of watches already open.
func patient(ctx context.Context) context.Context { return context.WithValue(ctx, patientKey{}, true) }

func isPatient(ctx context.Context) bool { return ctx.Value(patientKey{}) != nil }

// acquire takes a slot for a build of unknown size; release gives it back.
func (l *buildLimit) acquire(ctx context.Context) (release func(), err error) { return l.take(ctx, -1) }

// take takes a slot for a build, list or page of at most n items (n < 0: not known), none when n is small;
// release gives it back.
func (l *buildLimit) take(ctx context.Context, n int) (release func(), err error) {
	if err := ctx.Err(); err != nil { // the client is gone: no slot for it
		return nil, err
	}
	if n >= 0 && n <= l.small {
		return func() {}, nil
	}
	name := userOf(ctx)
	l.mu.Lock()
	u := l.user(name)
	if l.running < l.slots && l.queued == 0 {
		start := l.start(u)
		l.mu.Unlock()
		return l.releaser(name, u, start), nil
	}
	if !isPatient(ctx) && len(u.waiting)+u.blocked >= l.maxWaiting() {
		l.leave(name, u)
		l.mu.Unlock()
		return nil, l.tooMany(ctx, true)
	}
	l.arrivals++
	w := &slotWaiter{ready: make(chan struct{}), order: l.arrivals}
	u.waiting = append(u.waiting, w)
	l.queued++
	l.mu.Unlock()
	var timeout <-chan time.Time
	if !isPatient(ctx) {
		timeout = l.after(l.wait)
	}
	select {
	case <-w.ready:
		return l.releaser(name, u, w.start), nil
	case <-ctx.Done():
	case <-timeout:
	}
	if l.abandon(name, u, w, ctx.Err() == nil) {
		return l.releaser(name, u, w.start), nil // granted as its wait ran out: it may as well build
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	return nil, l.tooMany(ctx, false)
}

// sizer is a kind that knows, before listing, at most how many objects a selection holds (pods: PodIndex).
type sizer interface {
	upTo(namespace string, sel labels.Selector) (n int, known bool)
}

// upTo is at most how many objects k selects in sel, -1 when k does not know.
func upTo[P any](k kind[P], sel scope) int {
	if s, ok := k.(sizer); ok {
		if n, known := s.upTo(sel.namespace, sel.labels); known {
			return n
		}
	}
	return -1
}

// clock is the limit's time, as a duration since it was made.
func (l *buildLimit) clock() time.Duration { return l.now().Sub(l.epoch) }

// user returns name's share, new ones starting level with the least served user present: a user's slot time is
// counted from when it came, so that one that leaves and comes back neither gains nor loses. l.mu is held.
func (l *buildLimit) user(name string) *slotUser {
	if u := l.users[name]; u != nil {
		return u
	}
	u := &slotUser{}
	now, first := l.clock(), true
	for _, o := range l.users {
		if t := o.slotTime(now); first || t < u.used {
			u.used, first = t, false
		}
	}
	l.users[name] = u
	return u
}

// slotTime is the time u's builds held slots, those running included.
func (u *slotUser) slotTime(now time.Duration) time.Duration {
	return u.used + time.Duration(u.running)*now - u.started
}

// leave forgets u when it has nothing running or waiting. l.mu is held.
func (l *buildLimit) leave(name string, u *slotUser) {
	if u.running == 0 && len(u.waiting) == 0 && u.blocked == 0 {
		delete(l.users, name)
	}
}

// start runs a build of u in a free slot. l.mu is held.
func (l *buildLimit) start(u *slotUser) time.Duration {
	now := l.clock()
	l.running++
	u.running++
	u.started += now
	return now
}

// releaser gives the slot of u's build started at start back, once.
func (l *buildLimit) releaser(name string, u *slotUser, start time.Duration) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.stop(name, u, start)
			l.grant()
		})
	}
}

// stop ends a build of u started at start. l.mu is held.
func (l *buildLimit) stop(name string, u *slotUser, start time.Duration) {
	l.running--
	u.running--
	u.started -= start
	u.used += l.clock() - start
	l.leave(name, u)
}

// grant gives free slots to waiting requests: the first of the user whose builds held slots least (then the one
// with fewer running, then the one waiting longest). l.mu is held.
func (l *buildLimit) grant() {
	now := l.clock()
	for l.running < l.slots && l.queued > 0 {
		var next *slotUser
		for _, u := range l.users {
			if len(u.waiting) > 0 && (next == nil || u.before(next, now)) {
				next = u
			}
		}
		w := next.waiting[0]
		next.waiting = next.waiting[1:]
		l.queued--
		w.granted, w.start = true, l.start(next)
		close(w.ready)
	}
}

func (u *slotUser) before(o *slotUser, now time.Duration) bool {
	if a, b := u.slotTime(now), o.slotTime(now); a != b {
		return a < b
	}
	if u.running != o.running {
		return u.running < o.running
	}
	return u.waiting[0].order < o.waiting[0].order
}

// abandon takes w out of u's waiting requests; when it was granted meanwhile, it keeps the slot if keep says so
// (true is returned), else gives it to the next.
func (l *buildLimit) abandon(name string, u *slotUser, w *slotWaiter, keep bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		if keep {
			return true
		}
		l.stop(name, u, w.start)
		l.grant()
		return false
	}
	for i, o := range u.waiting {
		if o == w {
			u.waiting = append(u.waiting[:i:i], u.waiting[i+1:]...)
			l.queued--
			break
		}
	}
	l.leave(name, u)
	return false
}

func (l *buildLimit) tooMany(ctx context.Context, user bool) error {
	buildsRejected.WithLabelValues(requestVersion(ctx)).Inc()
	if user {
		return apierrors.NewTooManyRequests(fmt.Sprintf(
			"too many of your lists are waiting to be built (%d): try again", l.maxWaiting()), 1)
	}
	return apierrors.NewTooManyRequests(fmt.Sprintf(
		"too many lists being built at once (%d, a few per core): try again", l.slots), 1)
}
