package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// DefaultAnswerBytes is the budget of answers in flight when none is given and no memory limit is known
// (Deps.AnswerBytes).
const DefaultAnswerBytes = 128 << 20

const (
	// smallAnswer is the estimate under which an answer takes nothing from the budget: an HPA's selection, a page of
	// a few pods. Such answers are many and short, and bounding them would cost more than they hold.
	smallAnswer = 64 << 10
	// answerUserParts: one user's answers in flight take at most this part of the budget, so that one reader's
	// stalled answers leave room for others; a user holding nothing may still take one answer of any size.
	answerUserParts = 4
)

// answerBudget bounds in bytes the answers nothing keeps while they are made, encoded and written (DESIGN.md
// section 3, "Readers' cost"): a full list or a page made for one request, a table. What builds keep between
// requests is the keeper's; this is the rest of what readers hold, for as long as a client takes to read it. A
// large answer takes its estimated bytes before it is made and gives them back once its response has been
// written (answersWritten, the handler filter, releases what the request took); a request finding no room lets go
// of its answer and of its build while it waits (reserve), at most the build wait, then gets 429. A user already
// waiting with maxWaiting requests is answered 429 at once, as for build slots (buildLimit.maxWaiting): waiting
// holds no room, but each waiter holds a request the server accepts (--max-requests-inflight), and one user must
// not take them all.
type answerBudget struct {
	budget     int64
	wait       time.Duration
	after      func(time.Duration) <-chan time.Time
	maxWaiting int // a user's requests waiting for room

	mu      sync.Mutex
	total   int64
	users   map[string]int64
	waiting map[string]int // requests waiting for room, by user
	freed   chan struct{}  // closed, and replaced, when room is given back
}

// newAnswerBudget bounds answers in flight to budget bytes (0: DefaultAnswerBytes), a user's waiting requests to
// minWaiting (newReaders: as many as for build slots).
func newAnswerBudget(budget int64) *answerBudget {
	if budget <= 0 {
		budget = DefaultAnswerBytes
	}
	return &answerBudget{budget: budget, wait: defaultBuildWait, after: time.After, maxWaiting: minWaiting,
		users: map[string]int64{}, waiting: map[string]int{}, freed: make(chan struct{})}
}

// answerHold is the room one request holds, taken by its answers and given back when its response is written.
type answerHold struct {
	mu     sync.Mutex
	budget *answerBudget // the one taken from; nil while the request holds nothing
	user   string
	bytes  int64 // room held
	used   int64 // by answers made
	// converts: the request asks for its answer converted (a table, metadata only), set before it is handled.
	converts bool
}

type answerHoldKey struct{}

// withAnswerHold gives the request of ctx a hold of its own, for release once its response is written.
func withAnswerHold(ctx context.Context) (context.Context, *answerHold) {
	h := &answerHold{user: userOf(ctx)}
	return context.WithValue(ctx, answerHoldKey{}, h), h
}

func holdOf(ctx context.Context) *answerHold {
	h, _ := ctx.Value(answerHoldKey{}).(*answerHold)
	return h
}

// noRoom is take's answer when the budget has no room now and the caller lets go of what it holds before
// waiting for it (reserve).
type noRoom struct{ bytes int64 }

func (e noRoom) Error() string { return fmt.Sprintf("no room for an answer of %d bytes", e.bytes) }

// isNoRoom reports whether err is a noRoom, and the bytes it wanted.
func isNoRoom(err error) (int64, bool) {
	var e noRoom
	if errors.As(err, &e) {
		return e.bytes, true
	}
	return 0, false
}

// take takes n bytes for an answer of the request of ctx. An answer under smallAnswer takes nothing, nor does a
// call that did not come through the handler (nobody would give the bytes back); an ended request gets its error.
// A request holding room already (a table of its own list) uses it, and waits for what it lacks in the budget as
// a whole, the pair capped at the whole budget: under its user's share it would wait for room it holds itself.
// Otherwise, when there is no room, take waits (wait) or returns noRoom.
func (a *answerBudget) take(ctx context.Context, n int64, wait bool) error {
	if n < smallAnswer {
		return nil
	}
	if err := ctx.Err(); err != nil { // the client is gone: nothing to make for it
		return err
	}
	h := holdOf(ctx)
	if h == nil {
		return nil
	}
	n = min(n, a.budget)
	h.mu.Lock()
	defer h.mu.Unlock()
	if free := h.bytes - h.used; free >= n {
		h.used += n
		return nil
	} else if h.bytes > 0 {
		// The request's own list holds room, and its table is that answer made over: the pair counts as one
		// answer, capped at the whole budget, and waits for room in the budget as a whole, not a user's share.
		if extra := min(n-free, a.budget-h.bytes); extra > 0 {
			if err := a.waitFor(ctx, h, extra, a.fitsWhole); err != nil {
				return err
			}
		}
		h.used = h.bytes
		return nil
	}
	if !wait {
		if !a.tryTake(h, n) {
			return noRoom{n}
		}
	} else if err := a.await(ctx, h, n); err != nil {
		return err
	}
	h.used = n
	return nil
}

// reserve waits for n bytes of room for the request of ctx, which holds nothing, for the answer it makes next.
func (a *answerBudget) reserve(ctx context.Context, n int64) error {
	h := holdOf(ctx)
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return a.await(ctx, h, min(n, a.budget))
}

// fits reports whether user may take n bytes now. a.mu is held.
func (a *answerBudget) fits(user string, n int64) bool {
	held := a.users[user]
	return a.total+n <= a.budget && (held == 0 || held+n <= a.budget/answerUserParts)
}

// tryTake takes n bytes for h when they fit now. h.mu is held.
func (a *answerBudget) tryTake(h *answerHold, n int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.fits(h.user, n) {
		return false
	}
	a.add(h, n)
	return true
}

// fitsWhole reports whether n more bytes fit the budget as a whole. a.mu is held.
func (a *answerBudget) fitsWhole(_ string, n int64) bool { return a.total+n <= a.budget }

// await takes n bytes for h, which holds nothing, waiting within ctx for at most the build wait; then 429. h.mu
// is held.
func (a *answerBudget) await(ctx context.Context, h *answerHold, n int64) error {
	if h.bytes > 0 || a.tryTake(h, n) {
		return nil
	}
	return a.waitFor(ctx, h, n, a.fits)
}

// waitFor takes n more bytes for h once fit says they fit, waiting within ctx for at most the build wait; then
// 429, at once when h's user has maxWaiting requests waiting already. h.mu is held.
func (a *answerBudget) waitFor(ctx context.Context, h *answerHold, n int64, fit func(user string, n int64) bool) error {
	var timeout <-chan time.Time
	for waiting := false; ; waiting = true {
		a.mu.Lock()
		if fit(h.user, n) {
			a.add(h, n)
			a.mu.Unlock()
			return nil
		}
		if !waiting {
			if a.waiting[h.user] >= a.maxWaiting {
				a.mu.Unlock()
				return a.tooMany(ctx, true)
			}
			a.waiting[h.user]++
			defer a.stopWaiting(h.user)
			answersWaiting.Inc()
			defer answersWaiting.Dec()
			timeout = a.after(a.wait)
		}
		freed := a.freed // taken under a.mu with the check: no release goes unseen
		a.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return a.tooMany(ctx, false)
			}
			return ctx.Err()
		case <-timeout:
			return a.tooMany(ctx, false)
		}
	}
}

// stopWaiting counts a request of user no longer waiting.
func (a *answerBudget) stopWaiting(user string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting[user]--; a.waiting[user] <= 0 {
		delete(a.waiting, user)
	}
}

// add charges n bytes to h. a.mu is held.
func (a *answerBudget) add(h *answerHold, n int64) {
	h.budget = a
	h.bytes += n
	a.total += n
	a.users[h.user] += n
	answersInFlightBytes.Set(float64(a.total))
}

// release gives back what the request took: its response has been written, or it failed.
func (h *answerHold) release() {
	h.mu.Lock()
	a, n := h.budget, h.bytes
	h.budget, h.bytes, h.used = nil, 0, 0
	h.mu.Unlock()
	if a == nil {
		return
	}
	a.mu.Lock()
	a.total -= n
	if a.users[h.user] -= n; a.users[h.user] <= 0 {
		delete(a.users, h.user)
	}
	answersInFlightBytes.Set(float64(a.total))
	close(a.freed)
	a.freed = make(chan struct{})
	a.mu.Unlock()
}

// usage returns the bytes in flight in all and user's.
func (a *answerBudget) usage(user string) (total, byUser int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total, a.users[user]
}

// tooMany is the 429 of a request that found no room: at once, its user having maxWaiting requests waiting
// (user), or after its wait.
func (a *answerBudget) tooMany(ctx context.Context, user bool) error {
	answersRejected.WithLabelValues(requestVersion(ctx)).Inc()
	if user {
		return apierrors.NewTooManyRequests(fmt.Sprintf(
			"too many of your large answers are waiting for room in --answer-bytes (%d): try again", a.maxWaiting), 1)
	}
	return apierrors.NewTooManyRequests(fmt.Sprintf(
		"large answers being written take all of --answer-bytes (%d bytes; one user at most a quarter): try again",
		a.budget), 1)
}

// The answer budget's estimates, per item of JSON and per table row (TestAnswerEstimates checks them).
const (
	jsonPodBytes       = 240
	jsonContainerBytes = 85
	jsonNodeBytes      = 300
	tableRowBytes      = 1 << 10 // its cells, the object's metadata the table carries, and their JSON
)

// answerBytes estimates what an answer of es holds while it is written: its items (listBytes) and their JSON
// encoding, the largest wire format, which the encoder may hold whole. A list written directly
// (directlists.go) makes no items, but the format is known only as it is encoded, and room is taken before.
func answerBytes[P any](es []entry[P]) int64 { return listBytes(es) + jsonBytes(es) }

// jsonBytes estimates the JSON of es' items.
func jsonBytes[P any](es []entry[P]) int64 {
	var n int64
	for i := range es {
		if p, ok := any(es[i].point).(storage.PodPoint); ok {
			n += jsonPodBytes + int64(len(p.Names))*jsonContainerBytes
		} else {
			n += jsonNodeBytes
		}
	}
	return n
}

// tableBytes estimates a table of n rows and its encoding.
func tableBytes(n int) int64 { return int64(n) * tableRowBytes }
