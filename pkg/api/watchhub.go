package api

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

const (
	// DefaultMaxWatches bounds concurrent watches (--max-watches). Watches of one selection share their events, so
	// each costs a goroutine and a queue of shared deliveries; the bound keeps a flood of them from taking the server.
	DefaultMaxWatches = 1000
	// DefaultMaxWatchesPerUser bounds one user's concurrent watches (--max-watches-per-user), so that anyone with
	// `view` on a namespace cannot take every watch slot.
	DefaultMaxWatchesPerUser = 100
)

// watchHub counts the server's watches, in total and per user, refuses those beyond the bounds before any work is
// done for them, and ends them all on shutdown.
type watchHub struct {
	max, perUser int // perUser 0: no per-user bound

	mu        sync.Mutex
	active    int
	byUser    map[string]int
	byVersion map[string]int // for the watches gauge
	closed    bool
	stopping  chan struct{} // closed by shutdown
}

// newWatchHub bounds watches to max in total (0: DefaultMaxWatches) and perUser per user (0: unbounded).
func newWatchHub(max, perUser int) *watchHub {
	if max <= 0 {
		max = DefaultMaxWatches
	}
	return &watchHub{max: max, perUser: perUser, byUser: map[string]int{}, byVersion: map[string]int{},
		stopping: make(chan struct{})}
}

// userOf names the request's user for the per-user bound; "" when the request carries none.
func userOf(ctx context.Context) string {
	if u, ok := genericapirequest.UserFrom(ctx); ok && u != nil {
		return u.GetName()
	}
	return ""
}

// acquire takes a slot for a watch of user through API version (for the metrics).
func (h *watchHub) acquire(user, version string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return apierrors.NewServiceUnavailable("the server is shutting down")
	case h.active >= h.max:
		watchesRejected.WithLabelValues("total", version).Inc()
		return apierrors.NewTooManyRequests(fmt.Sprintf("too many watches: %d are open, the limit (--max-watches)", h.active), 1)
	case h.perUser > 0 && h.byUser[user] >= h.perUser:
		watchesRejected.WithLabelValues("user", version).Inc()
		return apierrors.NewTooManyRequests(fmt.Sprintf(
			"too many watches: user %q has %d open, the limit (--max-watches-per-user)", user, h.byUser[user]), 1)
	}
	h.active++
	h.byUser[user]++
	h.byVersion[version]++
	watchesActive.WithLabelValues(version).Set(float64(h.byVersion[version]))
	return nil
}

func (h *watchHub) release(user, version string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.active--
	if h.byUser[user]--; h.byUser[user] <= 0 {
		delete(h.byUser, user)
	}
	h.byVersion[version]--
	watchesActive.WithLabelValues(version).Set(float64(h.byVersion[version]))
}

// shutdown ends every watch and refuses new ones, so that stopping the server does not wait for watch timeouts.
func (h *watchHub) shutdown() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.stopping)
	}
	return nil
}
