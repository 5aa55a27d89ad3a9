package collect

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Source collects one cycle's samples: *scraper.Scraper and *adapter.Adapter.
type Source interface {
	// Budget is how long one cycle may take: the deadline the loop gives each Collect.
	Budget() time.Duration
	// Collect fetches and parses the cycle's samples, hands every batch to add before it returns, and reports how
	// the cycle went (DESIGN.md section 3). ctx carries the cycle's deadline.
	Collect(ctx context.Context, add storage.AppendFunc) storage.Outcome
}

// Options configure a Loop.
type Options struct {
	// Source names the source in logs and in the duration metric's name: "kubelet" or "prometheus".
	Source string
	// Resolution is the interval between the starts of two cycles (--metric-resolution).
	Resolution time.Duration
	// Now is the clock that times cycles (default time.Now).
	Now func() time.Time
	// PublishEvery is how often the loop asks storage to publish what a cycle in progress has appended (default
	// and least storage.MinPublishInterval; storage skips a publication when nothing arrived). Negative: only at
	// Commit.
	PublishEvery time.Duration
}

// Loop runs the collection cycles of one source into storage.
type Loop struct {
	src      Source
	store    *storage.Storage
	opts     Options
	duration *metrics.Histogram
	started  time.Time // when the loop was built: Live's grace before the first cycle counts from it

	// warmed is the newest batch of each key the warm-up collected, copied, for the first cycle (Warm).
	warmMu sync.Mutex
	warmed map[string]warmBatch
}

// warmBatch is a batch the warm-up kept and when it landed.
type warmBatch struct {
	b  *storage.Batch
	at time.Time
}

// sourceName is what a source's name may be: it becomes part of a metric name.
var sourceName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// New returns a loop collecting from src into store.
func New(src Source, store *storage.Storage, o Options) (*Loop, error) {
	if src == nil || store == nil {
		return nil, errors.New("collection loop: a source and a storage are required")
	}
	if o.Resolution <= 0 {
		return nil, fmt.Errorf("metric resolution %s: must be positive", o.Resolution)
	}
	if !sourceName.MatchString(o.Source) {
		return nil, fmt.Errorf("collection loop: source name %q: want lower-case letters, digits and _", o.Source)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PublishEvery == 0 {
		o.PublishEvery = storage.MinPublishInterval
	}
	return &Loop{src: src, store: store, opts: o, duration: durationOf(o.Source), started: o.Now()}, nil
}

// Run collects once at once, then every Resolution until ctx is done. A cycle that overruns the resolution delays
// the next one rather than overlapping it.
func (l *Loop) Run(ctx context.Context) {
	klog.InfoS("Starting collection", "source", l.opts.Source, "resolution", l.opts.Resolution,
		"budget", l.src.Budget())
	ticker := time.NewTicker(l.opts.Resolution)
	defer ticker.Stop()
	for {
		if ctx.Err() != nil {
			return // a cycle now would only fail
		}
		l.cycle(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// cycle runs one collection cycle: the source collects within its budget into a storage cycle, published as its
// batches land, whose outcome is committed.
func (l *Loop) cycle(ctx context.Context) {
	start := l.opts.Now()
	ctx, cancel := context.WithTimeout(ctx, l.src.Budget())
	defer cancel()
	c := l.store.BeginCycle()
	l.appendWarmed(c, start)
	stop := l.publishing(c)
	o := l.src.Collect(ctx, c.Append)
	stop()
	c.Commit(o)
	l.duration.Observe(l.opts.Now().Sub(start).Seconds())
}

// publishing publishes c every PublishEvery until the returned stop is called, so that a sample is servable about
// a second after its node answered rather than when the cycle's slowest node has, seconds later in a large cluster
// (BENCHMARKS.md, "Figures behind the comments"). storage bounds how often it publishes whatever the loop asks
// (storage.MinPublishInterval). stop returns once no publication is running, so none races the Commit that follows.
func (l *Loop) publishing(c *storage.Cycle) (stop func()) {
	if l.opts.PublishEvery < 0 {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(l.opts.PublishEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				c.Publish()
			}
		}
	}()
	return func() { close(done); <-finished }
}
