package api

import (
	"context"
	"errors"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestGoneRequestStopsWaitingForTheSharedList (a review's finding): a request waiting for the full list another
// request is making of its build (fullList's lock) waited whatever its context said: a client gone, or a deadline
// passed, held its request, counted among its user's waiting ones, until the other request was done. It ends with
// its context's error, and makes nothing.
func TestGoneRequestStopsWaitingForTheSharedList(t *testing.T) {
	_, _, s, _ := hookedPods(t, 3)
	if _, err := s.List(asUser("alice"), &metainternalversion.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	var b *build[storage.PodPoint]
	s.builds.mu.Lock()
	for _, g := range s.builds.gens {
		for _, gb := range g.bySel {
			b = gb
		}
	}
	s.builds.mu.Unlock()
	if b == nil {
		t.Fatal("the list was not kept in the build cache: the test no longer reaches the shared list's lock")
	}
	b.full.letGo()   // as when a newer collection lands: the next request makes the list again
	b.full.mu.Lock() // another request is making it
	defer b.full.mu.Unlock()
	built := buildsSoFar(t)

	ctx, cancel := context.WithCancel(asUser("bob"))
	done := make(chan error, 1)
	go func() {
		_, err := s.List(ctx, &metainternalversion.ListOptions{})
		done <- err
	}()
	waitFor(t, "bob's list waiting for the shared list", func() bool { return s.limit.waitingNow() == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the gone request's list: %v, want its context's error", err)
		}
	case <-time.After(20 * time.Second): // a bound, not an assertion
		t.Fatal("a request whose client went away still waits for another request's list 20 s later")
	}
	if n := buildsSoFar(t) - built; n != 0 || b.full.obj != nil {
		t.Errorf("the gone request made %v builds and a list (%v), want none", n, b.full.obj != nil)
	}
	if n := s.limit.waitingNow(); n != 0 {
		t.Errorf("%d requests still counted waiting, want 0", n)
	}
}

// TestWaitLockUnlockOfUnlockedPanics (a review's finding): unlocking a waitLock nobody held blocked its goroutine,
// and the request it served, forever; it panics now, as sync.Mutex's Unlock does.
func TestWaitLockUnlockOfUnlockedPanics(t *testing.T) {
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		var m waitLock
		if m.TryLock() {
			m.Unlock()
		}
		m.Unlock()
	}()
	select {
	case r := <-recovered:
		if r == nil {
			t.Error("a second Unlock returned: want a panic")
		}
	case <-time.After(10 * time.Second): // a guard against the deadlock, not a timing
		t.Fatal("a second Unlock blocked its goroutine")
	}
}
