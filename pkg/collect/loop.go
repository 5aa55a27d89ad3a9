package collect

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
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

// Warm collects before the first cycle, so that the source's connections are open then and each series has a sample
// already. At a cold start of a large cluster the kubelets' TLS handshakes are most of a first cycle's work (about
// 0.75 ms of CPU a node, ours and the kubelet's: BENCHMARKS.md), and the pod informer's initial list takes seconds
// more than the node informer's (15 to 30 s at 300,000 pods), so cmd warms the kubelet source once the nodes are
// known, while the pods are still being listed, and cancels ctx once they are. What the warm-up collected is neither
// stored nor published then: whose pod is whose is not known yet (DESIGN.md section 2, "Whose samples count"). The
// newest batch of each node is kept and appended at the start of the first cycle, once the pods are known and if it
// is at least half a resolution old (appendWarmed), so storage judges it as any other; a series that needs two
// samples is then servable after the first cycle rather than the second, a resolution sooner (its window says the
// longer span). Each round runs within the source's budget; when one runs out of budget before the nodes (at 10,000
// nodes one reached 5,000 to 10,000 of them), another follows, of only the nodes not reached when the source can
// tell them (a retrier), at most maxWarmRounds. A round that ran out of nodes instead (a kubelet that refuses at
// once) ends the warm-up: another would only repeat it. It must return before Run starts.
func (l *Loop) Warm(ctx context.Context) {
	for round := 1; round <= maxWarmRounds && l.warm(ctx, round); round++ {
	}
}

// maxWarmRounds bounds the warm-up when the pods take long to list: six budgets, a minute by default.
const maxWarmRounds = 6

// retrier is a source that can collect from only what its previous collection did not reach (the scraper).
type retrier interface {
	Retry(ctx context.Context, add storage.AppendFunc) storage.Outcome
}

// warm runs one round of Warm and says whether another would reach more.
func (l *Loop) warm(ctx context.Context, round int) (more bool) {
	start := l.opts.Now()
	budget, cancel := context.WithTimeout(ctx, l.src.Budget())
	defer cancel()
	var o storage.Outcome
	if r, ok := l.src.(retrier); ok && round > 1 {
		o = r.Retry(budget, l.keepWarmed)
	} else {
		o = l.src.Collect(budget, l.keepWarmed)
	}
	klog.InfoS("Warmed up the source's connections before the first cycle", "source", l.opts.Source,
		"round", round, "reached", o.Reached, "tried", o.Listed, "duration", l.opts.Now().Sub(start))
	return o.Reached < o.Listed && ctx.Err() == nil && errors.Is(budget.Err(), context.DeadlineExceeded)
}

// keepWarmed keeps a copy of one batch the warm-up collected (a source reuses its batches), the newest of its key.
// Its strings are the source's and immutable; only the slices are copied. At 10,000 nodes of 30 pods that is about
// 40 MB until the first cycle appends it.
func (l *Loop) keepWarmed(b *storage.Batch) storage.Rejection {
	c := *b
	c.Nodes, c.Containers = slices.Clone(b.Nodes), slices.Clone(b.Containers)
	at := l.opts.Now()
	l.warmMu.Lock()
	defer l.warmMu.Unlock()
	if l.warmed == nil {
		l.warmed = map[string]warmBatch{}
	}
	l.warmed[b.Key] = warmBatch{&c, at}
	return storage.Rejection{} // judged when appended: a pod's node is not known yet
}

// appendWarmed appends to the first cycle what the warm-up kept at least half a resolution before now, and lets
// all of it go. A younger one would make the first rates span a fraction of the window the API promises, and so
// be noisier than any later (a small cluster's pods are listed within a second); a kubelet refreshes its stats
// about every 10 s, so it would mostly be a repeat anyway.
func (l *Loop) appendWarmed(c *storage.Cycle, now time.Time) {
	l.warmMu.Lock()
	warmed := l.warmed
	l.warmed = nil
	l.warmMu.Unlock()
	for _, w := range warmed {
		if now.Sub(w.at) >= l.opts.Resolution/2 {
			c.Append(w.b)
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
// a second after its node answered rather than when the cycle's slowest node has (issue 17: 5 to 10 s at 10,000
// nodes). stop returns once no publication is running, so none races the Commit that follows.
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
