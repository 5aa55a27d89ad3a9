package scraper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Store is what the scraper needs of storage.
type Store interface {
	Store(*storage.Batch) storage.Rejection
	EndCycle(success bool, err error)
}

// NodeLister lists nodes; client-go's corev1 NodeLister fits.
type NodeLister interface {
	List(selector labels.Selector) ([]*corev1.Node, error)
}

// Scraper collects every selected node's kubelet resource metrics once per resolution.
type Scraper struct {
	opts   Options
	nodes  NodeLister
	store  Store
	client *kubeletClient

	// Touched by one cycle at a time (cycles never overlap); within a cycle each node by one worker only.
	states  map[string]*nodeState
	workers []*worker
	cycles  uint64
	// meanScrape is the previous cycle's mean time to scrape a node, which sizes the next cycle's workers.
	meanScrape time.Duration
	// retain is the largest response buffer a worker keeps after a scrape (retainFor); set between cycles.
	retain int
	// Bodies read this cycle and their bytes, for the next cycle's retain.
	bodies, bodyBytes atomic.Int64

	lastCycle atomic.Int64 // unix nanoseconds of the newest finished cycle
}

// nodeState is what the scraper remembers of a node between cycles.
type nodeState struct {
	parser    *parser
	cycle     uint64 // the newest cycle that listed the node
	failures  int    // consecutive failed scrapes: the error is logged at the first only
	rejecting bool   // storage rejected samples at the previous scrape
	foreign   bool   // the previous response reported pods bound to other nodes
	lossy     bool   // the previous response lost lines or samples
	panicking bool   // the previous scrape panicked
}

// worker is one concurrent scrape slot; its buffer and batch are reused for every node it scrapes.
type worker struct {
	buf     []byte
	readers readers
	batch   storage.Batch
}

// New validates o and builds the kubelet client.
func New(o Options, nodes NodeLister, store Store) (*Scraper, error) {
	if nodes == nil || store == nil {
		return nil, errors.New("scraper: a node lister and a store are required")
	}
	o, err := o.complete()
	if err != nil {
		return nil, fmt.Errorf("invalid kubelet scraper options: %w", err)
	}
	c, err := newKubeletClient(&o)
	if err != nil {
		return nil, err
	}
	RegisterMetrics()
	return &Scraper{opts: o, nodes: nodes, store: store, client: c, states: make(map[string]*nodeState),
		retain: retainFor(0)}, nil
}

// Run collects once immediately, then every Resolution until ctx is done. A cycle that overruns the resolution
// delays the next one rather than overlapping it.
func (s *Scraper) Run(ctx context.Context) {
	klog.InfoS("Starting kubelet scraper", "resolution", s.opts.Resolution, "timeout", s.opts.Timeout,
		"concurrency", s.opts.Concurrency, "nodeSelector", s.opts.NodeSelector.String())
	ticker := time.NewTicker(s.opts.Resolution)
	defer ticker.Stop()
	for {
		if ctx.Err() != nil {
			return // a cycle now would only fail every node
		}
		s.collect(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// LastCycle is when the newest collection cycle finished (zero before the first), for a liveness check.
func (s *Scraper) LastCycle() time.Time {
	if n := s.lastCycle.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// collect runs one cycle. It is bounded by the request timeout, and by the resolution when that is shorter (as in
// metrics-server), so that one slow kubelet cannot hold back every other node's next sample.
func (s *Scraper) collect(ctx context.Context) {
	start := time.Now()
	budget := min(s.opts.Timeout, s.opts.Resolution)
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	defer func() {
		collectionDuration.Observe(time.Since(start).Seconds())
		s.lastCycle.Store(time.Now().UnixNano())
	}()

	nodes, err := s.nodes.List(s.opts.NodeSelector)
	if err != nil {
		err = fmt.Errorf("kubelet source: listing nodes: %w", err)
		klog.ErrorS(err, "Failed to list nodes")
		s.store.EndCycle(false, err)
		return
	}
	s.cycles++
	states := make([]*nodeState, len(nodes))
	for i, n := range nodes {
		st := s.states[n.Name]
		if st == nil {
			st = &nodeState{parser: newParser()}
			s.states[n.Name] = st
		}
		st.cycle, states[i] = s.cycles, st
	}
	s.forgetGoneNodes()

	errs := make([]error, len(nodes))
	jobs := make(chan int)
	var wg sync.WaitGroup
	// Time spent scraping and the scrapes it covers: only those started before the deadline, since the rest fail
	// at once and would make the nodes look faster than they are.
	var scraping, timed atomic.Int64
	workers := 0
	addWorkers := func(n int) {
		for len(s.workers) < workers+n {
			s.workers = append(s.workers, &worker{})
		}
		for _, w := range s.workers[workers : workers+n] {
			wg.Go(func() {
				for i := range jobs {
					t, late := time.Now(), ctx.Err() != nil
					errs[i] = s.work(ctx, w, nodes[i], states[i])
					if !late {
						scraping.Add(int64(time.Since(t)))
						timed.Add(1)
					}
				}
			})
		}
		workers += n
	}
	addWorkers(workersFor(len(nodes), s.opts.Concurrency, s.meanScrape, budget))
	tick := time.NewTicker(max(budget/20, 10*time.Millisecond))
	for i := 0; i < len(nodes); {
		select {
		case jobs <- i:
			i++
		case <-tick.C:
			if n := rampUp(workers, i, len(nodes), time.Since(start), budget/2); n > 0 {
				klog.V(2).InfoS("Adding scrape workers mid-cycle", "workers", workers, "adding", n, "started", i,
					"nodes", len(nodes), "elapsed", time.Since(start))
				addWorkers(n)
			}
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	if n := timed.Load(); n > 0 {
		s.meanScrape = time.Duration(scraping.Load() / n)
	}
	if n := s.bodies.Swap(0); n > 0 {
		s.retain = retainFor(s.bodyBytes.Swap(0) / n)
	}

	cycleErr := summarize(nodes, errs)
	failed := 0
	if cycleErr != nil {
		failed = len(cycleErr.Errs)
	}
	s.store.EndCycle(len(nodes) == 0 || failed < len(nodes), errOrNil(cycleErr))
	klog.V(2).InfoS("Collection cycle finished", "nodes", len(nodes), "failed", failed, "duration", time.Since(start),
		"workers", workers, "meanScrape", s.meanScrape)
}

// forgetGoneNodes drops the state and the per-node metric series of nodes the lister no longer returns.
func (s *Scraper) forgetGoneNodes() {
	for name, st := range s.states {
		if st.cycle != s.cycles {
			delete(s.states, name)
			nodeUp.DeleteLabelValues(name)
			klog.V(1).InfoS("Node left the kubelet scraper", "node", klog.KRef("", name))
		}
	}
}

// scrape fetches, parses and stores one node, and returns its error.
func (s *Scraper) scrape(ctx context.Context, w *worker, node *corev1.Node, st *nodeState) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	url, err := nodeURL(node, &s.opts)
	if err == nil {
		w.buf, err = s.client.fetch(ctx, node.Name, url, w.buf, &w.readers)
	}
	if err == nil {
		stats := st.parser.parse(w.buf, time.Now(), node.Name, &w.batch)
		err = s.store1(node.Name, url, w, st, &stats)
	}
	scrapeDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		s.failed(node.Name, st, err)
		return err
	}
	requestsTotal.WithLabelValues(outcomeSuccess).Inc()
	nodeUp.WithLabelValues(node.Name).Set(1)
	if st.failures > 0 {
		klog.InfoS("Scraping node recovered", "node", klog.KRef("", node.Name), "failedScrapes", st.failures)
		st.failures = 0
	}
	return nil
}

// store1 hands one parsed response to storage and reports what it lost.
func (s *Scraper) store1(node, url string, w *worker, st *nodeState, stats *parseStats) error {
	b := &w.batch
	if len(b.Nodes) == 0 && len(b.Containers) == 0 {
		// The parser's error quotes the response: for the log only.
		return logonly.Wrap(fmt.Errorf("node %q: GET %s: no usable samples in %d bytes (%d bad lines)",
			node, url, len(w.buf), stats.BadLines), "firstError", stats.FirstError)
	}
	b.Key, b.CPU, b.Window = node, storage.CPUCumulative, 0
	rej := s.store.Store(b)
	countInvalid(stats)
	ref := klog.KRef("", node)
	switch {
	case rej.Total() > 0 && !st.rejecting:
		klog.ErrorS(nil, "Kubelet sent zero or invalid values; they are not served", "node", ref,
			"invalid", rej.Invalid, "zero", rej.Zero, "invalidSwap", rej.InvalidSwap, "example", rej.Example)
	case rej.Total() == 0 && st.rejecting:
		klog.InfoS("Kubelet values are valid again", "node", ref)
	}
	st.rejecting = rej.Total() > 0
	switch {
	case rej.Foreign > 0 && !st.foreign:
		klog.InfoS("Kubelet reports pods bound to other nodes; their samples are dropped", "node", ref,
			"samples", rej.Foreign, "example", rej.ForeignPod)
	case rej.Foreign == 0 && st.foreign:
		klog.InfoS("Kubelet no longer reports pods of other nodes", "node", ref)
	}
	st.foreign = rej.Foreign > 0
	lossy := stats.problems()
	if lossy && !st.lossy {
		klog.ErrorS(stats.FirstError, "Kubelet response lost lines or samples", "node", ref,
			"badLines", stats.BadLines, "truncated", stats.Truncated, "duplicates", stats.Duplicates,
			"missingLabels", stats.MissingLabels, "incompleteContainers", stats.Incomplete,
			"nodeMissing", stats.NodeMissing, "badStartTimes", stats.BadStartTime)
	}
	st.lossy = lossy
	if stats.ScrapeError {
		klog.V(2).InfoS("Kubelet reports resource_scrape_error", "node", ref)
	}
	return nil
}

// failed counts a failed scrape and logs it once per failure streak, and a panic's stack once per streak of panics.
func (s *Scraper) failed(node string, st *nodeState, err error) {
	outcome, panicked := outcomeError, errors.Is(err, logonly.ErrPanic)
	switch {
	case panicked:
		outcome = outcomePanic
	case errors.Is(err, context.DeadlineExceeded):
		outcome = outcomeTimeout
	}
	requestsTotal.WithLabelValues(outcome).Inc()
	nodeUp.WithLabelValues(node).Set(0)
	st.failures++
	if st.failures == 1 || panicked && !st.panicking {
		klog.ErrorS(err, "Failed to scrape node", append([]any{"node", klog.KRef("", node)}, logonly.KV(err)...)...)
	} else {
		klog.V(4).InfoS("Scraping node still fails", "node", klog.KRef("", node), "failedScrapes", st.failures, "err", err)
	}
	st.panicking = panicked
}

// CycleError is a cycle's error: which nodes failed and why. Unwrap gives every node's error.
type CycleError struct {
	Nodes int     // nodes in the cycle
	Errs  []error // one per failed node
}

// maxListed is how many node errors the message spells out.
const maxListed = 3

func (e *CycleError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d nodes failed: ", len(e.Errs), e.Nodes)
	for i, err := range e.Errs[:min(len(e.Errs), maxListed)] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	if len(e.Errs) > maxListed {
		fmt.Fprintf(&b, "; and %d more", len(e.Errs)-maxListed)
	}
	return b.String()
}

func (e *CycleError) Unwrap() []error { return e.Errs }

func summarize(nodes []*corev1.Node, errs []error) *CycleError {
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &CycleError{Nodes: len(nodes), Errs: failed}
}

// errOrNil keeps a nil *CycleError from becoming a non-nil error.
func errOrNil(e *CycleError) error {
	if e == nil {
		return nil
	}
	return e
}
