package api

import (
	"container/list"
	"sync"
)

// DefaultReaderCacheBytes is the budget of what readers' builds keep when none is given and no memory limit is
// known (Deps.ReaderCacheBytes).
const DefaultReaderCacheBytes = 64 << 20

// keeper bounds what readers keep between requests (builds: their entries, shared lists and pages, watch events
// and every encoding of them; watch feeds: the deliveries queued to their watchers and the build they lead from) by
// bytes, not by count (DESIGN.md section 3, "Readers' cost"), and shares the budget fairly between users. Each
// thing kept has holders, the users whose requests use it, and its bytes are split evenly between them: a user
// reading what another made pays its part. A user at or above its share (the budget split evenly between the
// users holding anything) makes room by evicting what it alone holds, least recently used first: a thing others
// hold too stays (letting go of it would free nothing, its share moving to them). So one user cycling through distinct
// selections that each match everything evicts its own, never the server's memory or another user's builds; a
// user below its share takes room from the heaviest user. What is not kept is still served, built for the request
// alone (and the number built at once is buildLimit's to bound). Bytes are estimates, cheap to make: items times
// a per-item size, plus encoded bytes as they are made.
type keeper struct {
	budget int64

	mu    sync.Mutex
	total int64
	users map[string]*userKept
}

// userKept is what one user holds, least recently used first, and its share of their bytes.
type userKept struct {
	bytes int64
	items list.List // of *kept
}

// kept is the account of one thing kept (a build, a watch feed): its bytes and its holders.
type kept struct {
	user    string                   // the user whose request made it: its first holder
	holders map[string]*list.Element // each holder's place in its items; empty when not kept
	bytes   int64
	gone    bool // evicted or forgotten: nothing more is charged to it
	live    bool // a watch feed: ending it ends watches, so what can be built again never makes it go
	// drop is told that user was made to let go (to make room); last when nobody holds it any more, so what it
	// keeps must go. Called on its own goroutine, once the accounts are settled.
	drop func(user string, last bool)
}

func newKeeper(budget int64) *keeper {
	if budget <= 0 {
		budget = DefaultReaderCacheBytes
	}
	return &keeper{budget: budget, users: map[string]*userKept{}}
}

// share is what each holder of k pays of b bytes.
func share(k *kept, b int64) int64 {
	if len(k.holders) == 0 {
		return 0
	}
	return b / int64(len(k.holders))
}

// reshare applies change to k (its bytes or holders), moving each holder's share. Called with kp.mu held.
func (kp *keeper) reshare(k *kept, change func()) {
	old := share(k, k.bytes)
	for user := range k.holders {
		kp.users[user].bytes -= old
	}
	before := k.bytes
	change()
	now := share(k, k.bytes)
	for user := range k.holders {
		kp.users[user].bytes += now
	}
	kp.total += k.bytes - before
	buildsKeptBytes.Set(float64(kp.total))
}

// hold makes user a holder of k (the first one when k is new), and marks k used now by user: the least recently
// used go first. Nothing is charged to a thing gone.
func (kp *keeper) hold(k *kept, user string) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if k.gone {
		return
	}
	u := kp.users[user]
	if u == nil {
		u = &userKept{}
		kp.users[user] = u
	}
	if e, ok := k.holders[user]; ok {
		u.items.MoveToBack(e)
		return
	}
	if k.holders == nil {
		k.holders = map[string]*list.Element{}
	}
	kp.reshare(k, func() { k.holders[user] = u.items.PushBack(k) })
}

// unhold lets user go of k (its last watch of a feed ended); the last holder's going forgets k.
func (kp *keeper) unhold(k *kept, user string) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	kp.letGo(k, user)
}

// letGo takes user off k's holders; it reports whether k was left with none (and so removed). kp.mu is held.
func (kp *keeper) letGo(k *kept, user string) bool {
	e, ok := k.holders[user]
	if !ok {
		return false
	}
	if len(k.holders) == 1 {
		kp.remove(k)
		return true
	}
	u := kp.users[user]
	kp.reshare(k, func() {
		delete(k.holders, user)
		u.items.Remove(e)
	})
	if u.items.Len() == 0 {
		delete(kp.users, user)
	}
	return false
}

// letting is one holder let go to make room, told once the locks are released.
type letting struct {
	k    *kept
	user string
	last bool
}

// admit charges n more bytes to k, held already (hold), making room as fairness says for its heaviest holder,
// and reports whether k may keep them. k itself is never let go of here: when there is no room without it,
// nothing is charged and the caller keeps nothing more (a build not admitted at all is the request's alone).
func (kp *keeper) admit(k *kept, n int64) bool {
	kp.mu.Lock()
	if k.gone || len(k.holders) == 0 || n > kp.budget {
		kp.mu.Unlock()
		return false
	}
	var let []letting
	for kp.total+n > kp.budget {
		v, user := kp.victim(k, n)
		if v == nil {
			break
		}
		let = append(let, letting{v, user, kp.letGo(v, user)})
	}
	ok := kp.total+n <= kp.budget
	if ok {
		kp.reshare(k, func() { k.bytes += n })
	}
	kp.mu.Unlock()
	for _, l := range let {
		l.told()
	}
	return ok
}

// told tells a thing kept that a holder let go, and counts an eviction.
func (l letting) told() {
	if l.last {
		buildsEvicted.Inc()
	}
	go l.k.drop(l.user, l.last)
}

// charge charges n bytes already spent to k (an encoding, made while answering): when they do not fit, k is
// evicted, and what it kept goes once its readers are done with it.
func (kp *keeper) charge(k *kept, n int64) {
	if kp.admit(k, n) {
		return
	}
	kp.mu.Lock()
	var let []letting
	for user := range k.holders {
		let = append(let, letting{k, user, len(k.holders) == 1})
		kp.letGo(k, user)
	}
	kp.mu.Unlock()
	for _, l := range let {
		l.told()
	}
}

// shrink sets what k is charged to n bytes, no more than it was: the build let go of its shares.
func (kp *keeper) shrink(k *kept, n int64) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if len(k.holders) > 0 && n < k.bytes {
		kp.reshare(k, func() { k.bytes = n })
	}
}

// refund takes n bytes off what k is charged: a share it let go of (a page, a watch delivery sent).
func (kp *keeper) refund(k *kept, n int64) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if len(k.holders) > 0 {
		kp.reshare(k, func() { k.bytes -= min(n, k.bytes) })
	}
}

// forget stops accounting for k, which its cache dropped: nothing more is charged to it.
func (kp *keeper) forget(k *kept) {
	kp.mu.Lock()
	kp.remove(k)
	kp.mu.Unlock()
}

// remove takes k out of the accounts and marks it gone. Called with kp.mu held.
func (kp *keeper) remove(k *kept) {
	k.gone = true
	kp.reshare(k, func() {
		for user, e := range k.holders {
			u := kp.users[user]
			u.items.Remove(e)
			if u.items.Len() == 0 {
				delete(kp.users, user)
			}
		}
		k.holders, k.bytes = nil, 0
	})
}

// usage returns the bytes kept in all and user's share of them.
func (kp *keeper) usage(user string) (total, byUser int64) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if u := kp.users[user]; u != nil {
		byUser = u.bytes
	}
	return kp.total, byUser
}
