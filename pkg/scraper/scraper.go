package scraper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// NodeLister lists nodes; client-go's corev1 NodeLister fits.
type NodeLister interface {
	List(selector labels.Selector) ([]*corev1.Node, error)
}

// Scraper collects every selected node's kubelet resource metrics, one cycle per Collect.
type Scraper struct {
	opts   Options
	nodes  NodeLister
	client *kubeletClient
	// buffers are what workers read bodies into, lent to the client's fetch once a response has come.
	buffers *buffers

	// Touched by one cycle at a time (the loop never overlaps cycles); within a cycle each node by one worker only.
	// states is a cache of parsers and failure streaks by node name: which objects exist is storage's to know
	// from the informers, not the scraper's.
	states  map[string]*nodeState
	workers []*worker
	cycles  uint64
	// meanScrape is the previous cycle's mean time to scrape a node, which sizes the next cycle's workers.
	meanScrape time.Duration
	// panicking: the previous cycle was lost to a panic outside any one node's scrape (logged once per streak).
	panicking logonly.Streak[bool]
}

// nodeState is what the scraper remembers of a node between cycles: its parser and its streaks, each logged
// when it begins and ends.
type nodeState struct {
	parser   *parser
	cycle    uint64 // the newest cycle that listed the node
	failures int    // consecutive failed scrapes: the error is logged at the first only
	body     int    // bytes of the newest body read, which the next is lent a buffer for (buffers.lend)
	// connDue is when the node's connection has lived long enough (connage.go); zero before the node's first scrape
	// and after a close, until the next scrape draws it.
	connDue time.Time
	// Streaks of the node's responses: storage rejected samples, they reported pods bound to other nodes or
	// samples of pods' predecessors under their names, they lost lines or samples, the scrape panicked.
	rejecting, foreign, predecessor, lossy, panicking logonly.Streak[bool]
}

// worker is one concurrent scrape slot; its batch is reused for every node it scrapes, and its buffer and gzip
// reader are borrowed from the Scraper's buffers while it reads a body.
type worker struct {
	buf       []byte
	readers   readers
	oversized bool // the response grew buf beyond the retain limit: the batch goes too, once stored
	batch     storage.Batch
}

// New validates o and builds the kubelet client.
func New(o Options, nodes NodeLister) (*Scraper, error) {
	if nodes == nil {
		return nil, errors.New("scraper: a node lister is required")
	}
	o, err := o.complete()
	if err != nil {
		return nil, fmt.Errorf("invalid kubelet scraper options: %w", err)
	}
	c, err := newKubeletClient(&o)
	if err != nil {
		return nil, err
	}
	registerMetrics()
	klog.InfoS("Kubelet source configured", "timeout", o.Timeout, "concurrency", o.Concurrency,
		"nodeSelector", o.NodeSelector.String())
	return &Scraper{opts: o, nodes: nodes, client: c, buffers: newBuffers(o.Concurrency),
		states: make(map[string]*nodeState)}, nil
}

// Budget is how long one cycle may take: the request timeout, which cmd fits within the resolution
// (collect.FitTimeout and collect.MaxTimeout, as in metrics-server), so that one slow kubelet cannot hold back every
// other node's next sample.
func (s *Scraper) Budget() time.Duration { return s.opts.Timeout }

// Collect runs one cycle within ctx's deadline (the loop's, Budget): it scrapes every selected node, hands each
// node's batch to add, and reports the cycle's outcome: a success when at least one node (or no node at all) was
// scraped, and an error naming the nodes that failed.
func (s *Scraper) Collect(ctx context.Context, add storage.AppendFunc) storage.Outcome {
	return s.guarded(ctx, add, false)
}

// Retry is Collect of only the nodes whose latest scrape failed or that were never scraped: what a warm-up round
// cut short by its budget did not reach (collect.Loop.Warm), without scraping again the nodes it did.
func (s *Scraper) Retry(ctx context.Context, add storage.AppendFunc) storage.Outcome {
	return s.guarded(ctx, add, true)
}

func (s *Scraper) collect(ctx context.Context, add storage.AppendFunc, unreached bool) storage.Outcome {
	start := time.Now()
	budget := s.Budget()
	listed, err := s.nodes.List(s.opts.NodeSelector)
	if err != nil {
		err = fmt.Errorf("kubelet source: listing nodes: %w", err)
		klog.ErrorS(err, "Failed to list nodes")
		return storage.Outcome{Err: err}
	}
	s.cycles++
	nodes, states := listed[:0:0], make([]*nodeState, 0, len(listed))
	for _, n := range listed {
		st := s.states[n.Name]
		fresh := st == nil // every node a collection lists, it tries: one it had, it reached unless it failed
		if fresh {
			st = &nodeState{parser: newParser()}
			s.states[n.Name] = st
		}
		st.cycle = s.cycles
		if !unreached || fresh || st.failures > 0 {
			nodes, states = append(nodes, n), append(states, st)
		}
	}
	s.forgetGoneNodes()

	errs, workers := s.dispatch(ctx, nodes, states, add, budget, start)
	s.buffers.endCycle()

	cycleErr := summarize(nodes, errs)
	failed := 0
	if cycleErr != nil {
		failed = len(cycleErr.Errs)
	}
	klog.V(2).InfoS("Collection cycle finished", "nodes", len(nodes), "failed", failed, "duration", time.Since(start),
		"workers", workers, "meanScrape", s.meanScrape)
	return storage.Outcome{Success: len(nodes) == 0 || failed < len(nodes), Err: errOrNil(cycleErr),
		Listed: len(nodes), Reached: len(nodes) - failed}
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

// scrape fetches and parses one node, hands its batch to add, and returns its error.
func (s *Scraper) scrape(ctx context.Context, w *worker, node *corev1.Node, st *nodeState, add storage.AppendFunc) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	at, err := nodeURL(node, &s.opts)
	if err == nil {
		at.closeAfter = st.closeConn(start, s.opts.ConnMaxAge)
		w.buf, err = s.client.fetch(ctx, node.Name, at, w.buf, &w.readers, s.buffers, st.body)
		if at.closeAfter && w.readers.answered {
			st.closed()
		}
	}
	if err == nil {
		stats := st.parser.parse(w.buf, time.Now(), node.Name, &w.batch)
		size := len(w.buf)
		s.buffers.parsed(size)
		st.body = size
		s.release(w)
		err = s.deliver(node.Name, at.shown, size, w, st, &stats, add)
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

// deliver hands one parsed response to add and reports what it lost.
func (s *Scraper) deliver(node, url string, size int, w *worker, st *nodeState, stats *parseStats, add storage.AppendFunc) error {
	b := &w.batch
	if len(b.Nodes) == 0 && len(b.Containers) == 0 {
		// The parser's error quotes the response: for the log only.
		return logonly.Wrap(fmt.Errorf("node %q: GET %s: no usable samples in %d bytes (%d bad lines)",
			node, url, size, stats.BadLines), "firstError", stats.FirstError)
	}
	b.Key, b.CPU, b.Window = node, storage.CPUCumulative, 0
	rej := add(b)
	countInvalid(stats)
	ref := klog.KRef("", node)
	st.logRejections(ref, rej)
	if st.lossy.Set(stats.problems()) == logonly.Began {
		klog.ErrorS(stats.FirstError, "Kubelet response lost lines or samples", "node", ref,
			"badLines", stats.BadLines, "truncated", stats.Truncated, "duplicates", stats.Duplicates,
			"missingLabels", stats.MissingLabels, "incompleteContainers", stats.Incomplete,
			"nodeMissing", stats.NodeMissing, "badStartTimes", stats.BadStartTime)
	}
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
	if began := st.panicking.Set(panicked) == logonly.Began; st.failures == 1 || began {
		klog.ErrorS(err, "Failed to scrape node", append([]any{"node", klog.KRef("", node)}, logonly.KV(err)...)...)
	} else {
		klog.V(4).InfoS("Scraping node still fails", "node", klog.KRef("", node), "failedScrapes", st.failures, "err", err)
	}
}

// cycleError is a cycle's error: which nodes failed and why. Unwrap gives every node's error.
type cycleError struct {
	Nodes int     // nodes in the cycle
	Errs  []error // one per failed node
}

// maxListed is how many node errors the message spells out.
const maxListed = 3

func (e *cycleError) Error() string {
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

func (e *cycleError) Unwrap() []error { return e.Errs }

func summarize(nodes []*corev1.Node, errs []error) *cycleError {
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &cycleError{Nodes: len(nodes), Errs: failed}
}

// errOrNil keeps a nil *cycleError from becoming a non-nil error.
func errOrNil(e *cycleError) error {
	if e == nil {
		return nil
	}
	return e
}
