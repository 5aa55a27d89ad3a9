package api

import (
	"context"
	"sync"
)

// A request that needs a build another request is making waits for it rather than making its own (build.go): one
// user's copies of one selection would then each hold a request the server accepts (--max-requests-inflight)
// for as long as the build takes. They count among the user's waiting requests, with those waiting for a slot.

// await waits for done, a build another request is making for this one: counted among the user's waiting
// requests, so that one user's copies of one selection cannot take every request the server accepts at once.
func (l *buildLimit) await(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	default:
	}
	leave, err := l.block(ctx)
	if err != nil {
		return err
	}
	defer leave()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lock locks mu, which another request holds while it makes what this one will share, counted as await is.
func (l *buildLimit) lock(ctx context.Context, mu *sync.Mutex) error {
	if mu.TryLock() {
		return nil
	}
	leave, err := l.block(ctx)
	if err != nil {
		return err
	}
	defer leave()
	mu.Lock()
	return nil
}

// block counts a request of ctx's user waiting on another's build until leave; 429 when it has too many already.
func (l *buildLimit) block(ctx context.Context) (leave func(), err error) {
	name := userOf(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.user(name)
	if !isPatient(ctx) && len(u.waiting)+u.blocked >= l.maxWaiting() {
		l.leave(name, u)
		return nil, l.tooMany(ctx, true)
	}
	u.blocked++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		u.blocked--
		l.leave(name, u)
	}, nil
}
