package api

import (
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// DefaultMaxWatches bounds concurrent watches (--max-watches). Each holds a goroutine and up to two lists of what
// it selects; beyond the bound a client gets 429 and retries, rather than the server running out of memory.
const DefaultMaxWatches = 1000

// watchHub counts the server's watches, refuses those beyond the bound, and ends them all on shutdown.
type watchHub struct {
	max int

	mu       sync.Mutex
	active   int
	closed   bool
	stopping chan struct{} // closed by shutdown
}

func newWatchHub(max int) *watchHub {
	if max <= 0 {
		max = DefaultMaxWatches
	}
	return &watchHub{max: max, stopping: make(chan struct{})}
}

func (h *watchHub) acquire() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return apierrors.NewServiceUnavailable("the server is shutting down")
	case h.active >= h.max:
		watchesRejected.Inc()
		return apierrors.NewTooManyRequests(fmt.Sprintf("too many watches: %d are open, the limit (--max-watches)", h.active), 1)
	}
	h.active++
	watchesActive.Set(float64(h.active))
	return nil
}

func (h *watchHub) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.active--
	watchesActive.Set(float64(h.active))
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
