package api

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
)

// fullList is a build's list of every entry, shared by the build's requests while the build is kept: its entries
// and the encodings made of them (leanList), charged to the build as made; let go of (letGo) once a newer
// collection lands or the build is evicted.
type fullList struct {
	mu   waitLock
	obj  leanObject // the shared list, once made
	kept *shared    // what obj is charged
}

// leanObject is a leanList of any kind.
type leanObject interface {
	runtime.Object
	forRequest(ctx context.Context) (runtime.Object, error)
	listObjects(ctx context.Context) (runtime.Object, error)
	setCharge(charge func(n int))
}

// letGo lets go of the list: requests that still have it encode it uncharged.
func (f *fullList) letGo() {
	f.mu.Lock()
	if f.kept != nil {
		f.kept.letGo()
	}
	f.obj, f.kept = nil, nil
	f.mu.Unlock()
}

// fullList returns the list of every entry of b: its shared one (b.full), made by the first request, when b is kept;
// else, or when the request converts the list (a table, metadata only: the apiserver reads its items), the
// request's own, within the answer budget.
func (b *build[P]) fullList(ctx context.Context) (runtime.Object, error) {
	if len(b.entries) == 0 {
		// The handler sets an empty list's items in place; an empty list is cheap, so each request gets its own.
		return b.res.kind.list(nil, b.rv, b.created), nil
	}
	// admit(0) checks that b is still kept (not evicted, its account not forgotten).
	if !b.shared || convertsList(ctx) || !b.res.builds.keeper.admit(&b.keep, 0) {
		return b.res.alone(ctx, b.entries, true, func() (runtime.Object, error) { // this request's alone
			return b.res.kind.list(b.entries, b.rv, b.created), nil
		})
	}
	f := &b.full
	if err := b.res.limit.lock(ctx, &f.mu); err != nil { // counted among the user's waiting requests
		return nil, err
	}
	if f.obj == nil {
		l := newLeanList(b)
		f.kept = &shared{}
		f.obj = l
		b.res.builds.chargeEncodings(b, l, f.kept)
	}
	l := f.obj
	f.mu.Unlock()
	return l.forRequest(ctx)
}
