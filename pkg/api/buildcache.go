package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// buildCache holds the builds of the snapshots readers use, so that pages of a list read slowly and watches
// resuming from a recent resourceVersion share them too. What they keep is bounded by keeper. When a newer snapshot
// is published, each build sheds what it shares beyond its entries (build.shed: each part drops itself), and the
// builds go once their lease runs out (dropOn).
type buildCache[P any] struct {
	res    *metricsREST[P]
	keeper *keeper
	lease  time.Duration
	now    func() time.Time
	after  func(time.Duration) <-chan time.Time
	// fingerprint is setOf; tests make sets collide.
	fingerprint func([]object) objectSet
	mu          sync.Mutex
	gens        map[uint64]*genBuilds[P]
}

func newBuildCache[P any](res *metricsREST[P], kp *keeper) *buildCache[P] {
	return &buildCache[P]{res: res, keeper: kp, lease: buildLease, now: time.Now, after: time.After,
		fingerprint: setOf, gens: map[uint64]*genBuilds[P]{}}
}

// genBuilds are the builds of one snapshot, kept until their lease runs out once a newer snapshot is published. The
// cache holds the snapshot meanwhile (handle), so a continue token whose build was evicted reads the same collection
// again.
type genBuilds[P any] struct {
	bySel  map[string]*build[P]
	sets   sharedSets[P]    // the kept builds by their objects, and the selections reading another's (buildshare.go)
	until  time.Time        // each use leases the builds for buildLease more
	snap   storage.Snapshot // whose builds they are
	handle *storage.Handle  // nil when storage had let the snapshot go already
}

// buildLease is how long the builds of a snapshot are kept after their last use once a newer one is published: a
// page-through keeps its build as long as it keeps paging (each page renews the lease, whatever the publications
// meanwhile), and watches resuming from a recent resourceVersion share it too. A continue token whose build went
// continues from the newest committed snapshot (continuePage). What the builds keep is bounded by keeper
// meanwhile, so the lease bounds time, not memory.
const buildLease = 30 * time.Second

// keptGenerations bounds the snapshots the cache holds builds of at once, beyond those storage retains anyway. A
// build's entries point into its snapshot's layers, so a kept build of a few pods keeps its whole snapshot alive,
// which the keeper's bytes do not count: without this bound, one reader starting a small page-through every cycle
// and continuing each within the lease would keep a snapshot a cycle alive. Snapshots storage retains anyway
// (Snapshot.Retained: the newest publications, which readers without a resourceVersion read, and the newest commit,
// which page-throughs start from) cost nothing more than their builds, which the keeper bounds: they are never
// trimmed for it, so a reader choosing older versions cannot evict everyone's builds.
const keptGenerations = 4

// trimGens forgets the least recently used of the snapshots only the cache keeps alive (neither Retained by storage
// nor keep, the one just added) while it holds more than keptGenerations; it returns their builds for forget,
// called without c.mu. c.mu is held.
func (c *buildCache[P]) trimGens(keep uint64) []*build[P] {
	var out []*build[P]
	for len(c.gens) > keptGenerations {
		var oldest uint64
		var found bool
		for gen, g := range c.gens {
			if gen != keep && !g.snap.Retained() && (!found || g.until.Before(c.gens[oldest].until)) {
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

// lookup returns the build of sel at generation gen when the cache has it made, renewing its lease; nil when not.
func (c *buildCache[P]) lookup(ctx context.Context, gen uint64, sel scope) *build[P] {
	c.mu.Lock()
	g := c.gens[gen]
	var b *build[P]
	if g != nil {
		b, _ = g.built(sel.key())
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
	b = b.read()
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
			g = &genBuilds[P]{bySel: map[string]*build[P]{}, snap: snap}
			g.handle, _ = c.res.snaps.Hold(snap)
			c.gens[gen] = g
			go c.dropOn(snap.Changed(), gen)
			forget = c.trimGens(gen)
		}
		g.until = c.now().Add(c.lease)
		b, ok := g.built(key)
		if ok && b.stale(removals) { // made anew from the same snapshot; a page-through of it goes on in the new one
			g.unlink(b)
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
		if !errors.Is(b.err, errLeaderGone) && (b.err != nil || !b.read().stale(removals)) {
			if b.err != nil {
				return nil, b.err
			}
			r := b.read()
			c.keeper.hold(&r.keep, userOf(ctx))
			return r, nil
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
			g.unlink(b)
			c.mu.Unlock()
		}
		close(b.done)
	}()
	sameAs := func(objs []object) *build[P] { return c.sameAs(g, b, snap, objs) }
	if err := b.fill(ctx, c.res, snap, sel, sameAs); err != nil {
		b.err = err
		if ctx.Err() != nil {
			b.err = fmt.Errorf("%w: %w", errLeaderGone, err)
		}
		return nil, err
	}
	if b.same != nil { // another selection's build holds these objects: read it as a waiter of it would
		c.keeper.hold(&b.same.keep, userOf(ctx))
		return b.same, nil
	}
	c.mu.Lock()
	g.sets.add(b) // before the keeper may evict it, which unlinks it
	c.mu.Unlock()
	c.keeper.hold(&b.keep, b.keep.user)
	if kept = c.keeper.admit(&b.keep, entryBytes(b.entries)); !kept {
		c.keeper.forget(&b.keep)
	}
	b.shared = kept
	return b, nil
}

// evict drops b from the cache (the keeper needs its room): requests that have it finish with it, later ones
// build anew.
func (c *buildCache[P]) evict(b *build[P]) {
	c.mu.Lock()
	if g := c.gens[b.generation]; g != nil {
		g.unlink(b)
	}
	c.mu.Unlock()
	b.shed()
}

// chargeEncodings makes the encodings of obj, a list or page shared by b's readers (kept as p), charged to b
// while b keeps it; obj is returned.
func (c *buildCache[P]) chargeEncodings(b *build[P], obj runtime.Object, p *shared) runtime.Object {
	charge := func(n int) { p.charge(c.keeper, &b.keep, int64(n)) }
	switch e := obj.(type) {
	case interface{ encodingsOf() *encodings }:
		e.encodingsOf().charge = charge
	case interface{ setCharge(func(n int)) }:
		e.setCharge(charge)
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
