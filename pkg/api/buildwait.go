package api

import (
	"context"
	"fmt"
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

// lock locks mu, which another request holds while it makes what this one will share, counted as await is. A
// request whose context ends meanwhile (its client went away, its deadline passed) stops waiting: an error
// wrapping the context's, mu not locked.
func (l *buildLimit) lock(ctx context.Context, mu *waitLock) error {
	if mu.TryLock() {
		return nil
	}
	leave, err := l.block(ctx)
	if err != nil {
		return err
	}
	defer leave()
	return mu.lockWithin(ctx)
}

// waitLock is a mutex whose waiters may give up when their request ends (lockWithin), which sync.Mutex's cannot.
// Its zero value is unlocked.
type waitLock struct {
	once sync.Once
	held chan struct{} // holds a token while locked
}

func (m *waitLock) token() chan struct{} {
	m.once.Do(func() { m.held = make(chan struct{}, 1) })
	return m.held
}

// Lock locks m, waiting as long as it takes.
func (m *waitLock) Lock() { m.token() <- struct{}{} }

// Unlock unlocks m, locked by any goroutine. Unlocking it unlocked panics (sync.Mutex's is a fatal error): receiving
// the token would block the request's goroutine forever instead.
func (m *waitLock) Unlock() {
	select {
	case <-m.token():
	default:
		panic("api: unlock of an unlocked waitLock")
	}
}

// TryLock locks m when it is free, and reports whether it did.
func (m *waitLock) TryLock() bool {
	select {
	case m.token() <- struct{}{}:
		return true
	default:
		return false
	}
}

// lockWithin locks m, unless ctx ends first.
func (m *waitLock) lockWithin(ctx context.Context) error {
	select {
	case m.token() <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the list another request is making: %w", ctx.Err())
	}
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
