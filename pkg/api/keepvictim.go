package api

// What a user lets go of to make room (keeper.admit): split from keep.go, which holds the accounts.

// victim chooses what a user lets go of to make room for n more bytes of k, and who: k's heaviest holder's least
// recently used holding when that holder would be at or above its share (for a live k, another user's build when
// it has none: coldest), else the heaviest other user's. nil when there is nothing to let go of but k. Called with
// kp.mu held.
func (kp *keeper) victim(k *kept, n int64) (*kept, string) {
	var user string
	var u *userKept
	for h := range k.holders {
		if o := kp.users[h]; u == nil || o.bytes > u.bytes {
			user, u = h, o
		}
	}
	n = share(k, n)
	// u's share is the budget split between the users holding anything, u included.
	if u.bytes+n >= kp.budget/int64(len(kp.users)) {
		if v := oldest(u, k); v != nil || !k.live {
			return v, user
		}
		return kp.coldest(k)
	}
	var heaviest *userKept
	var name string
	for h, o := range kp.users {
		if o != u && (heaviest == nil || o.bytes > heaviest.bytes) {
			heaviest, name = o, h
		}
	}
	if heaviest == nil || heaviest.bytes <= u.bytes+n {
		return oldest(u, k), user
	}
	if v := oldest(heaviest, k); v != nil {
		return v, name
	}
	return oldest(u, k), user
}

// oldest is u's least recently used holding other than k (nil: none, not live) that u alone holds, or nil. What others hold too is
// skipped: letting go of it frees no bytes (its share moves to them), so admit would go on to them, and one
// small admission could end a thing all of them share. A live thing (a feed) is skipped unless k is live too:
// what is kept only to be served again (a build, a page) is never worth ending watches for.
func oldest(u *userKept, k *kept) *kept {
	for e := u.items.Front(); e != nil; e = e.Next() {
		if v := e.Value.(*kept); v != k && len(v.holders) == 1 && (!v.live || (k != nil && k.live)) {
			return v
		}
	}
	return nil
}

// coldest is, for a live k whose holder has nothing of its own to let go of, the least recently used thing that
// can be built again of the heaviest other user keeping one: a watch is refused only when all else kept is
// watches. Called with kp.mu held.
func (kp *keeper) coldest(k *kept) (*kept, string) {
	var v *kept
	var name string
	var heaviest int64
	for h, o := range kp.users {
		if _, holds := k.holders[h]; holds || (v != nil && o.bytes <= heaviest) {
			continue
		}
		if c := oldest(o, nil); c != nil {
			v, name, heaviest = c, h, o.bytes
		}
	}
	return v, name
}
