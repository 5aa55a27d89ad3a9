package api

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
)

// fullList is a build's list of every entry, shared by the build's requests, built and encoded once, when the
// keeper has room for it; let go of (letGo) once a newer collection lands or the build is evicted.
type fullList struct {
	mu   waitLock
	obj  runtime.Object // the shared list, once built
	kept *shared        // what obj is charged
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

// fullList returns the list of every entry of b: its shared one (b.full), made by the first request, when b is kept
// and the keeper has room for it; else the request's own, within the answer budget.
func (b *build[P]) fullList(ctx context.Context) (runtime.Object, error) {
	if len(b.entries) == 0 {
		// The handler sets an empty list's items in place; an empty list is cheap, so each request gets its own.
		return b.res.kind.list(nil, b.rv, b.created), nil
	}
	f := &b.full
	if err := b.res.limit.lock(ctx, &f.mu); err != nil { // counted among the user's waiting requests
		return nil, err
	}
	if f.obj != nil {
		defer f.mu.Unlock()
		return f.obj, nil
	}
	n := listBytes(b.entries)
	if !b.shared || !b.res.builds.keeper.admit(&b.keep, n) {
		f.mu.Unlock()
		return b.res.alone(ctx, b.entries, true, func() (runtime.Object, error) { // this request's alone
			return b.res.kind.list(b.entries, b.rv, b.created), nil
		})
	}
	defer f.mu.Unlock()
	release, err := b.res.limit.take(ctx, len(b.entries))
	if err != nil {
		b.res.builds.keeper.refund(&b.keep, n)
		return nil, err
	}
	defer release()
	list := b.res.kind.list(b.entries, b.rv, b.created)
	f.kept = &shared{bytes: n}
	f.obj = b.res.builds.chargeEncodings(b, b.res.kind.shared(list), f.kept)
	return f.obj, nil
}
