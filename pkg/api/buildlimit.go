package api

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// defaultBuildWait is how long a request waits for a build slot before it is answered 429 Too Many Requests.
const defaultBuildWait = 5 * time.Second

// buildLimit bounds the builds running at once (lists, pages and watch events made from a snapshot), a few per
// core: builds are CPU and memory, and a reader that asks for many distinct selections at once must not take the
// server's memory with it. A request beyond the bound waits within its context, at most wait, then gets 429 with
// Retry-After; watches' own builds (the events of a new collection) wait as long as it takes.
type buildLimit struct {
	slots chan struct{}
	wait  time.Duration
	after func(time.Duration) <-chan time.Time
}

// newBuildLimit allows n builds at once; 0 means twice GOMAXPROCS.
func newBuildLimit(n int) *buildLimit {
	if n <= 0 {
		n = 2 * runtime.GOMAXPROCS(0)
	}
	return &buildLimit{slots: make(chan struct{}, n), wait: defaultBuildWait, after: time.After}
}

type patientKey struct{}

// patient marks ctx as a build that waits for a slot without the 429: the events of watches already open.
func patient(ctx context.Context) context.Context { return context.WithValue(ctx, patientKey{}, true) }

// acquire takes a slot; release gives it back.
func (l *buildLimit) acquire(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil { // the client is gone: no slot for it
		return nil, err
	}
	release = func() { <-l.slots }
	select {
	case l.slots <- struct{}{}:
		return release, nil
	default:
	}
	var timeout <-chan time.Time
	if ctx.Value(patientKey{}) == nil {
		timeout = l.after(l.wait)
	}
	select {
	case l.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, l.tooMany(ctx)
		}
		return nil, ctx.Err()
	case <-timeout:
		return nil, l.tooMany(ctx)
	}
}

func (l *buildLimit) tooMany(ctx context.Context) error {
	buildsRejected.WithLabelValues(requestVersion(ctx)).Inc()
	return apierrors.NewTooManyRequests(fmt.Sprintf(
		"too many lists being built at once (%d, a few per core): try again", cap(l.slots)), 1)
}
