package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// rssSampler reads a server's RSS every 0.5 s in the background and keeps the largest reading.
type rssSampler struct {
	max  atomic.Uint64
	done chan struct{}
	wg   sync.WaitGroup
}

// sampleRSS samples b until ctx ends or stop is called; each (when not nil) sees every reading, e.g. to stop a
// phase whose server grows too large.
func sampleRSS(ctx context.Context, b *framework.Backend, each func(rss uint64)) *rssSampler {
	s := &rssSampler{done: make(chan struct{})}
	s.wg.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				st, err := b.Proc.Stat()
				if err != nil {
					continue
				}
				s.max.Store(max(s.max.Load(), st.RSS))
				if each != nil {
					each(st.RSS)
				}
			}
		}
	})
	return s
}

// stop ends the sampling and returns the largest reading (0 when there was none).
func (s *rssSampler) stop() uint64 {
	close(s.done)
	s.wg.Wait()
	return s.max.Load()
}

// observe reads b's CPU time and memory, then its self-metrics: one end of a measured window.
func observe(ctx context.Context, b *framework.Backend, hc *http.Client) (framework.ProcStat, samples, error) {
	st, err := b.Proc.Stat()
	if err != nil {
		return st, nil, err
	}
	m, err := scrapeMetrics(ctx, hc, b.URL())
	return st, m, err
}

// resetPeakRSS resets the kernel's RSS high-water mark (VmHWM) of pid, so a later reading is the phase's peak,
// not start-up's. It reports whether that worked (Linux only).
func resetPeakRSS(pid int) bool {
	if pid == 0 {
		return false
	}
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}
