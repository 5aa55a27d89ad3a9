package collect

import (
	"context"
	"errors"
	"slices"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Warmer is the optional interface of a Source that Warm warms: one whose first cycle would spend most of its work
// opening connections (the kubelet scraper's TLS handshakes, one a node). Retry is Collect of only what the
// previous collection did not reach. A source that is not a Warmer is not warmed: the Prometheus source has one
// connection, cheap to open, and a poll the warm-up threw away would cost Prometheus a whole query.
type Warmer interface {
	Retry(ctx context.Context, add storage.AppendFunc) storage.Outcome
}

// Start is the loop's way from start-up to its first cycle: it warms the source once nodesKnown says the nodes are
// listed (Warm) and until synced says every informer has synced, then runs the loop until ctx is done (Run). The
// first cycle never overlaps the warm-up: a source collects one cycle at a time. It returns at once when ctx is done
// before the informers synced.
func (l *Loop) Start(ctx context.Context, nodesKnown cache.InformerSynced, synced ...cache.InformerSynced) {
	warming, stopWarming := context.WithCancel(ctx)
	defer stopWarming()
	warmed := make(chan struct{})
	go func() {
		defer close(warmed)
		if cache.WaitForCacheSync(warming.Done(), nodesKnown) {
			l.Warm(warming) // until the pods are known (synced), in rounds
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	stopWarming()
	<-warmed
	klog.InfoS("Informers synced, starting collection")
	l.Run(ctx)
}

// maxWarmRounds bounds the warm-up when the pods take long to list: six budgets, a minute by default.
const maxWarmRounds = 6

// Warm collects before the first cycle, when the source is a Warmer, so that the first cycle runs on open
// connections and each series has a sample already; Start calls it once the nodes are known, while the pods are
// still being listed, and cancels ctx once they are. It must return before Run starts.
//
// What it collects is neither stored nor published then: whose pod is whose is not known yet (DESIGN.md section
// 2, "Whose samples count"). The newest batch of each key is kept and appended at the start of the first cycle
// (appendWarmed), so storage judges it as any other. Each round runs within the source's budget; a round that
// runs out of budget before it reached every node is followed by one of only the nodes not reached (Retry), at
// most maxWarmRounds; a round that ran out of nodes instead (a kubelet that refuses at once) ends the warm-up:
// another would only repeat it. BENCHMARKS.md (issue 17) has what it saves at scale.
func (l *Loop) Warm(ctx context.Context) {
	w, ok := l.src.(Warmer)
	if !ok {
		return
	}
	for round := 1; round <= maxWarmRounds && l.warm(ctx, w, round); round++ {
	}
}

// warm runs one round of Warm and says whether another would reach more.
func (l *Loop) warm(ctx context.Context, w Warmer, round int) (more bool) {
	start := l.opts.Now()
	budget, cancel := context.WithTimeout(ctx, l.src.Budget())
	defer cancel()
	var o storage.Outcome
	if round > 1 {
		o = w.Retry(budget, l.keepWarmed)
	} else {
		o = l.src.Collect(budget, l.keepWarmed)
	}
	klog.InfoS("Warmed up the source's connections before the first cycle", "source", l.opts.Source,
		"round", round, "reached", o.Reached, "tried", o.Listed, "duration", l.opts.Now().Sub(start))
	return o.Reached < o.Listed && ctx.Err() == nil && errors.Is(budget.Err(), context.DeadlineExceeded)
}

// keepWarmed keeps a copy of one batch the warm-up collected (a source reuses its batches), the newest of its key.
// Its strings are the source's and immutable; only the slices are copied.
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
