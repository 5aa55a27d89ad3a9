package api

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Readers share work per snapshot (DESIGN.md section 3, "Readers' cost"): every list, page and watch of one
// snapshot with the same namespace and selectors shares one build. A build is the selection's sorted entries (the
// key index: a few words per object), from which a list builds every item once and encodes it once per wire
// format, a page builds only its own items, and watches build their events' objects once, encoded once per format
// and written to every watcher. Which objects exist is as the informers saw them when the build was made: a build
// listed before a later deletion (storage's Removals) is not shared with the requests that come after it.

// maxSharedPageItems bounds the items of the pages of a build kept for clients paging through it together (the
// newest pages): clients paging in step share every page.
const maxSharedPageItems = 4096

// scope is what a build is shared by: a namespace ("" for all, or a cluster-scoped kind) and selectors.
type scope struct {
	namespace string
	selectors
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

// build is one selection of one snapshot. entries is set before done is closed and never changes after.
type build[P any] struct {
	res        *metricsREST[P]
	key        string // the selection's, in its generation's builds
	rv         string // "" for storage without snapshots
	generation uint64 // rv as a number
	created    metav1.Time
	entries    []entry[P] // sorted by (namespace,) name
	// removals is storage's Removals read before its objects were listed: an object deleted once the count grew
	// past it may be among its entries, so it is not shared with requests that come after that (get).
	removals uint64
	done     chan struct{}
	err      error
	// shared says the build is kept in the cache, so its full list and pages are shared and charged to keep;
	// otherwise it is one request's (and its waiters') alone. Set before done is closed.
	shared bool
	keep   kept

	fullMu   sync.Mutex
	full     runtime.Object // the shared list, once built, until the next collection lands
	fullKept *shared        // what full is charged

	// events are the entries as watch events carry them, made for the first watch that needs them; like full,
	// let go once a newer collection lands (feeds and queued batches keep what they still send).
	eventsMu sync.Mutex
	events   *buildEvents[P]

	pagesMu   sync.Mutex
	pages     map[[2]int]*shared // by [start, end) of entries
	order     [][2]int           // pages, oldest first
	pageItems int                // in pages
	old       bool               // a newer collection landed, or the build was evicted: pages are no longer kept
}

type buildEvents[P any] struct {
	items []*watchItem[P]
	added *batch  // ADDED for every entry: the initial events of a watch starting here
	kept  *shared // what they are charged
}

// fullList returns the list of every entry, shared by the requests of this build, built and encoded once, when the
// keeper has room for it; else the request's own, within the answer budget.
func (b *build[P]) fullList(ctx context.Context) (runtime.Object, error) {
	if len(b.entries) == 0 {
		// The handler sets an empty list's items in place; an empty list is cheap, so each request gets its own.
		return b.res.kind.list(nil, b.rv, b.created), nil
	}
	if err := b.res.limit.lock(ctx, &b.fullMu); err != nil { // counted among the user's waiting requests
		return nil, err
	}
	if b.full != nil {
		defer b.fullMu.Unlock()
		return b.full, nil
	}
	n := listBytes(b.entries)
	if !b.shared || !b.res.builds.keeper.admit(&b.keep, n) {
		b.fullMu.Unlock()
		return b.res.alone(ctx, b.entries, true, func() (runtime.Object, error) { // this request's alone
			return b.res.kind.list(b.entries, b.rv, b.created), nil
		})
	}
	defer b.fullMu.Unlock()
	release, err := b.res.limit.take(ctx, len(b.entries))
	if err != nil {
		b.res.builds.keeper.refund(&b.keep, n)
		return nil, err
	}
	defer release()
	list := b.res.kind.list(b.entries, b.rv, b.created)
	b.fullKept = &shared{bytes: n}
	b.full = b.res.builds.chargeEncodings(b, b.res.kind.shared(list), b.fullKept)
	return b.full, nil
}

// shed lets go of what the build shares beyond its entries: its full list, watch events and pages. Requests that
// still have them encode them uncharged: the build's account no longer counts them (keeper.shrink, forget).
func (b *build[P]) shed() {
	b.fullMu.Lock()
	if b.fullKept != nil {
		b.fullKept.letGo()
	}
	b.full, b.fullKept = nil, nil
	b.fullMu.Unlock()
	b.eventsMu.Lock()
	if b.events != nil {
		b.events.kept.letGo()
	}
	b.events = nil
	b.eventsMu.Unlock()
	b.pagesMu.Lock()
	for _, p := range b.pages {
		p.letGo()
	}
	b.pages, b.order, b.pageItems, b.old = nil, nil, 0, true
	b.pagesMu.Unlock()
}

// genBuilds are the builds of one snapshot, kept until their lease runs out once a newer snapshot is published. The cache holds
// the snapshot meanwhile (handle), so a continue token whose build was evicted reads the same collection again.
type genBuilds[P any] struct {
	bySel  map[string]*build[P]
	until  time.Time       // each use leases the builds for buildLease more
	handle *storage.Handle // nil when storage had let the snapshot go already
}

// buildLease is how long the builds of a snapshot are kept after their last use once a newer one is published: a
// page-through keeps its build as long as it keeps paging (each page renews the lease, whatever the publications
// meanwhile), and watches resuming from a recent resourceVersion share it too. A continue token whose build went
// continues from the newest committed snapshot (continuePage). What the builds keep is bounded by keeper
// meanwhile, so the lease bounds time, not memory.
const buildLease = 30 * time.Second

// keptGenerations bounds the snapshots the cache holds at once (their builds and storage handles). A build's
// entries point into its snapshot's layers, so a kept build of a few pods keeps its whole snapshot alive, which the
// keeper's bytes do not count: without this bound, one reader starting a small page-through every cycle and
// continuing each within the lease would keep a snapshot a cycle alive. The least recently used generation goes
// first, its handle released; its page-throughs continue from the newest committed snapshot.
const keptGenerations = 4

// trimGens forgets the least recently used generations beyond keptGenerations, never keep (the one just added);
// it returns their builds for forget, called without c.mu. c.mu is held.
func (c *buildCache[P]) trimGens(keep uint64) []*build[P] {
	var out []*build[P]
	for len(c.gens) > keptGenerations {
		var oldest uint64
		var found bool
		for gen, g := range c.gens {
			if gen != keep && (!found || g.until.Before(c.gens[oldest].until)) {
				oldest, found = gen, true
			}
		}
		if !found {
			break
		}
		for _, b := range c.gens[oldest].bySel {
			out = append(out, b)
		}
		c.gens[oldest].handle.Release()
		delete(c.gens, oldest)
	}
	return out
}

// buildCache holds the builds of the snapshots readers use, so that pages of a list read slowly and watches
// resuming from a recent resourceVersion share them too. What they keep is bounded by keeper.
type buildCache[P any] struct {
	res    *metricsREST[P]
	keeper *keeper
	lease  time.Duration
	now    func() time.Time
	after  func(time.Duration) <-chan time.Time
	mu     sync.Mutex
	gens   map[uint64]*genBuilds[P]
}

func newBuildCache[P any](res *metricsREST[P], kp *keeper) *buildCache[P] {
	return &buildCache[P]{res: res, keeper: kp, lease: buildLease, now: time.Now, after: time.After,
		gens: map[uint64]*genBuilds[P]{}}
}

// lookup returns the build of sel at generation gen when the cache has it made, renewing its lease; nil when not.
func (c *buildCache[P]) lookup(ctx context.Context, gen uint64, sel scope) *build[P] {
	c.mu.Lock()
	g := c.gens[gen]
	var b *build[P]
	if g != nil {
		b = g.bySel[sel.key()]
		if b != nil { // a miss renews nothing: a token naming a generation must not keep others' builds
			g.until = c.now().Add(c.lease)
		}
	}
	c.mu.Unlock()
	if b == nil {
		return nil
	}
	select {
	case <-b.done:
	default:
		return nil // being made: get waits for it
	}
	if b.err != nil {
		return nil
	}
	c.keeper.hold(&b.keep, userOf(ctx))
	return b
}

// errLeaderGone is what waiters see when the request building for them ended first: they try again.
var errLeaderGone = errors.New("the request building this list ended")

// get returns the build of sel at snap (resourceVersion rv), making it when nobody has. Concurrent requests for one
// build wait for it rather than each making their own; making one waits for a slot of buildLimit.
func (c *buildCache[P]) get(ctx context.Context, snap storage.Snapshot, sel scope) (*build[P], error) {
	if err := ctx.Err(); err != nil { // the client is gone: nothing to build for it
		return nil, err
	}
	gen := snap.Generation()
	key := sel.key()
	removals := c.res.snaps.Removals() // before listing: the informers have dropped what this counts
	for {
		c.mu.Lock()
		g := c.gens[gen]
		var forget []*build[P]
		if g == nil {
			g = &genBuilds[P]{bySel: map[string]*build[P]{}}
			g.handle, _ = c.res.snaps.Hold(snap)
			c.gens[gen] = g
			go c.dropOn(snap.Changed(), gen)
			forget = c.trimGens(gen)
		}
		g.until = c.now().Add(c.lease)
		b, ok := g.bySel[key]
		if ok && b.predates(removals) { // made anew from the same snapshot; a page-through of it goes on in the new one
			delete(g.bySel, key)
			forget, ok = append(forget, b), false
		}
		if !ok {
			b = &build[P]{key: key, removals: removals, done: make(chan struct{})}
			b.keep = kept{user: userOf(ctx), drop: func(_ string, last bool) {
				if last {
					c.evict(b)
				}
			}}
			g.bySel[key] = b
		}
		c.mu.Unlock()
		c.forget(forget)
		if !ok {
			return c.lead(ctx, b, g, snap, sel)
		}
		if err := c.res.limit.await(ctx, b.done); err != nil {
			return nil, err
		}
		if !errors.Is(b.err, errLeaderGone) && (b.err != nil || b.removals >= removals) {
			if b.err == nil {
				c.keeper.hold(&b.keep, userOf(ctx))
			}
			return b, b.err
		}
	}
}

// lead makes the build b that waiters wait for, and keeps it when the keeper has room: held by the request's
// user, then by every user whose request reads it. An error is not kept: the next request tries again.
func (c *buildCache[P]) lead(ctx context.Context, b *build[P], g *genBuilds[P], snap storage.Snapshot, sel scope) (*build[P], error) {
	kept := false
	defer func() {
		if r := recover(); r != nil {
			b.err = fmt.Errorf("building the list panicked: %v", r)
			defer panic(r) // this request fails as any panicking request does; the waiters get the error
		}
		if !kept {
			c.mu.Lock()
			if g.bySel[b.key] == b {
				delete(g.bySel, b.key)
			}
			c.mu.Unlock()
		}
		close(b.done)
	}()
	made, err := c.make(ctx, snap, sel)
	if err != nil {
		b.err = err
		if ctx.Err() != nil {
			b.err = fmt.Errorf("%w: %w", errLeaderGone, err)
		}
		return nil, err
	}
	b.res, b.rv, b.generation, b.created, b.entries = made.res, made.rv, made.generation, made.created, made.entries
	c.keeper.hold(&b.keep, b.keep.user)
	if kept = c.keeper.admit(&b.keep, entryBytes(b.entries)); !kept {
		c.keeper.forget(&b.keep)
	}
	b.shared = kept
	return b, nil
}

// make builds sel's entries at snap, in a slot of buildLimit.
func (c *buildCache[P]) make(ctx context.Context, snap storage.Snapshot, sel scope) (*build[P], error) {
	release, err := c.res.limit.take(ctx, upTo(c.res.kind, sel))
	if err != nil {
		return nil, err
	}
	defer release()
	s := c.res
	objs, err := s.kind.objects(sel.namespace, sel.labels)
	if err != nil {
		return nil, err
	}
	now := s.now()
	es := make([]entry[P], 0, len(objs))
	for _, o := range objs {
		if !sel.matchFields(o.namespace, o.name) {
			continue
		}
		if p, ok := s.kind.point(snap, o.namespace, o.name); ok {
			es = append(es, entry[P]{object: o, point: p})
			// Observed once per build, not per request: under load, 30,000 observations per request of one
			// histogram cost more CPU than serving the shared bytes.
			observeFreshness(now.Time, pointTime(p))
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].less(&es[j].object) })
	buildsMade.Inc()
	return &build[P]{res: s, rv: s.rv(snap), generation: snap.Generation(), created: now, entries: es, done: closed}, nil
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// evict drops b from the cache (the keeper needs its room): requests that have it finish with it, later ones
// build anew.
func (c *buildCache[P]) evict(b *build[P]) {
	c.mu.Lock()
	if g := c.gens[b.generation]; g != nil && g.bySel[b.key] == b {
		delete(g.bySel, b.key)
	}
	c.mu.Unlock()
	b.shed()
}

// chargeEncodings makes the encodings of obj, a list or page shared by b's readers (kept as p), charged to b
// while b keeps it; obj is returned.
func (c *buildCache[P]) chargeEncodings(b *build[P], obj runtime.Object, p *shared) runtime.Object {
	if e, ok := obj.(interface{ encodingsOf() *encodings }); ok {
		e.encodingsOf().charge = func(n int) { p.charge(c.keeper, &b.keep, int64(n)) }
	}
	return obj
}

// dropOn lets go of what the builds of generation gen hold once a newer snapshot is published: their full lists
// and watch events (tens of megabytes for every pod, with their encodings) at once, and the builds themselves once
// their lease ran out, whether or not a later request comes to sweep them: the last list of every pod held its
// entries until the next list.
func (c *buildCache[P]) dropOn(changed <-chan struct{}, gen uint64) {
	<-changed
	c.mu.Lock()
	var shed []*build[P]
	if g := c.gens[gen]; g != nil {
		for _, b := range g.bySel {
			shed = append(shed, b)
		}
	}
	c.mu.Unlock()
	for _, b := range shed {
		select {
		case <-b.done:
		default:
			continue // still being made: its entries are not ours to read yet
		}
		b.shed()
		c.keeper.shrink(&b.keep, entryBytes(b.entries))
	}
	for {
		c.mu.Lock()
		g := c.gens[gen]
		var left time.Duration
		if g != nil {
			left = g.until.Sub(c.now())
		}
		if left <= 0 {
			var forget []*build[P]
			if g != nil {
				for _, b := range g.bySel {
					forget = append(forget, b)
				}
				g.handle.Release()
			}
			delete(c.gens, gen)
			c.mu.Unlock()
			c.forget(forget)
			return
		}
		c.mu.Unlock()
		<-c.after(left)
	}
}

// forget lets go of builds dropped from the cache, and of their accounts.
func (c *buildCache[P]) forget(bs []*build[P]) {
	for _, b := range bs {
		c.keeper.forget(&b.keep)
		b.shed()
	}
}

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
