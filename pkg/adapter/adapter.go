package adapter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Options configure the Prometheus source.
type Options struct {
	ClientOptions
	// ConfigFile is a prometheus-adapter config file (or its ConfigMap manifest); "" uses the defaults.
	ConfigFile string
	// Now is the clock of the queries' evaluation time (default time.Now).
	Now func() time.Time
}

// Adapter polls Prometheus for every container's and node's CPU, memory and swap, one poll per Collect.
type Adapter struct {
	client  *client
	queries *queries
	now     func() time.Time

	// Streaks, logged when they begin, change and end: each query's ("error", "warning" or "panic"; by its
	// name), a poll's results lost to a panic while mapping them, series that cannot be served.
	queryStreaks    map[string]*logonly.Streak[string]
	mapping, series logonly.Streak[bool]
}

// New loads and checks the config and builds the HTTP client: every problem is reported here, at start-up.
func New(o Options) (*Adapter, error) {
	registerMetrics()
	cfg, err := loadConfig(o.ConfigFile)
	if err != nil {
		return nil, err
	}
	q, err := compile(cfg.ResourceRules)
	if err != nil {
		//lint:ignore ST1005 Prometheus is a proper noun
		return nil, fmt.Errorf("Prometheus config: %w", err)
	}
	c, err := newClient(o.ClientOptions)
	if err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	for _, q := range q.all() {
		klog.V(1).InfoS("Prometheus query", "query", q.name, "promql", q.promql, "window", q.window)
	}
	return &Adapter{client: c, queries: q, now: o.Now, queryStreaks: map[string]*logonly.Streak[string]{}}, nil
}

// Budget is how long one poll may take: the queries run at once, each within the query timeout (and the moment
// left to Prometheus to answer its own timeout, see client.deadline).
func (a *Adapter) Budget() time.Duration { return a.client.deadline() }

// result is one query's outcome.
type result struct {
	vec      model.Vector
	warnings []string
	err      error
}

// Collect runs one poll: the queries at one evaluation time, their results handed to add, and the cycle's outcome.
// A cycle succeeds when every CPU and memory query returned data; a partial one still stores what it has.
// The swap queries are optional (DESIGN.md section 4): no data is no swap, and a failing swap query is an error of
// the cycle (counted, logged, kept as its last error) that loses only the swap of that cycle, not the collection.
func (a *Adapter) Collect(ctx context.Context, add storage.AppendFunc) storage.Outcome {
	start := a.now()
	ts := evalTime(start)
	qs := a.queries.all()
	results := make([]result, len(qs))
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = a.run(ctx, q, ts)
		}()
	}
	wg.Wait()

	var errs []error
	failed := false
	for i, q := range qs {
		r := &results[i]
		a.account(q, r)
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s query: %w", q.name, r.err))
			failed = failed || !q.optional
		}
	}
	byQuery := make(map[*query]model.Vector, len(qs))
	for i, q := range qs {
		byQuery[q] = results[i].vec
	}
	delivered, mapErr := a.deliver(byQuery, add)
	if mapErr != nil {
		errs, failed = append(errs, mapErr), true
	}
	err := errors.Join(errs...)
	klog.V(2).InfoS("Polled Prometheus", "nodes", delivered.nodes, "containers", delivered.containers, "duration", a.now().Sub(start), "err", err)
	return storage.Outcome{Success: !failed, Err: err}
}

// counts are how many nodes and containers a poll delivered.
type counts struct{ nodes, containers int }

// deliver maps the queries' results (a query's vector by the query) to samples and hands them to add (storage
// stores them; the scraper's deliver is its twin). A panic there loses what the poll had not delivered, not the
// process (DESIGN.md section 3): an error, counted, and logged with its stack once per streak of panics.
func (a *Adapter) deliver(results map[*query]model.Vector, add storage.AppendFunc) (c counts, err error) {
	defer func() {
		p := recover()
		change := a.mapping.Set(p != nil)
		if p != nil {
			err = logonly.Recovered(p, "mapping the results")
			mappingPanics.Inc()
		}
		switch change {
		case logonly.Began:
			klog.ErrorS(err, "Prometheus results lost; will log again when a poll maps", logonly.KV(err)...)
		case logonly.Ended:
			klog.InfoS("Prometheus results are mapped again")
		}
	}()
	var sk skipped
	qc := a.queries
	// A nil query (no swap rule) has no vector: a map's zero value.
	nodes := mapNodes(results[&qc.nodeCPU], results[&qc.nodeMemory], results[qc.nodeSwap], &qc.nodeCPU,
		&qc.nodeMemory, qc.nodeSwap, &sk)
	containers := mapContainers(results[&qc.containerCPU], results[&qc.containerMemory], results[qc.containerSwap],
		&qc.containerCPU, &qc.containerMemory, qc.containerSwap, &sk)
	// Nodes and containers may average CPU over different windows, so they go in separate batches.
	rej := add(&storage.Batch{CPU: storage.CPURate, Window: qc.nodeCPU.window, Nodes: nodes})
	r2 := add(&storage.Batch{CPU: storage.CPURate, Window: qc.containerCPU.window, Containers: containers})
	rej.Add(r2)
	a.reportSkipped(sk, rej)
	return counts{len(nodes), len(containers)}, nil
}

// run runs one query. A panic loses that query only (DESIGN.md section 3): an error, counted and logged with its
// stack by account.
func (a *Adapter) run(ctx context.Context, q *query, ts time.Time) (r result) {
	defer func() {
		if p := recover(); p != nil {
			r = result{err: logonly.Recovered(p, "running the query")}
		}
	}()
	t := time.Now()
	vec, warnings, err := a.client.query(ctx, q.promql, ts)
	queryDuration.WithLabelValues(q.name).Observe(time.Since(t).Seconds())
	if err == nil && len(vec) == 0 && !q.optional {
		err = noData(warnings)
	}
	return result{vec, warnings, err}
}

// noData is the error of a query that returned nothing. Thanos and Mimir answer 200 with nothing and warnings
// when the stores behind them are down: then those, not the config, are the likely cause. The warnings may name
// internal addresses, so the 503 text counts them and the log line holds them.
func noData(warnings []string) error {
	if len(warnings) > 0 {
		return logonly.Wrap(fmt.Errorf("query returned no data and %d warning(s), a partial response: check that "+
			"the stores behind the Prometheus API are up (the log has the warnings)", len(warnings)), "warnings", warnings)
	}
	return errors.New("query returned no data: check that Prometheus scrapes the kubelets and that the " +
		"config's labels match the series")
}

// account counts a query's outcome and logs a change of state: the first failure of a streak and its recovery.
func (a *Adapter) account(q *query, r *result) {
	outcome := "success"
	switch {
	case errors.Is(r.err, logonly.ErrPanic):
		outcome = "panic"
	case errors.Is(r.err, errTimeout):
		outcome = "timeout"
	case r.err != nil:
		outcome = "error"
	}
	queriesTotal.WithLabelValues(q.name, outcome).Inc()
	if len(r.warnings) > 0 {
		queryWarnings.WithLabelValues(q.name).Add(float64(len(r.warnings)))
	}
	state := ""
	switch {
	case errors.Is(r.err, logonly.ErrPanic):
		state = "panic" // logged with its stack even when the query was failing already
	case r.err != nil:
		state = "error"
	case len(r.warnings) > 0:
		state = "warning"
	}
	streak := a.queryStreaks[q.name]
	if streak == nil {
		streak = &logonly.Streak[string]{}
		a.queryStreaks[q.name] = streak
	}
	switch streak.Set(state) {
	case logonly.Ended:
		klog.InfoS("Prometheus query recovered", "query", q.name)
	case logonly.Began, logonly.Changed:
		if r.err != nil {
			klog.ErrorS(r.err, "Prometheus query failed; will log again when it recovers",
				append([]any{"query", q.name, "promql", q.promql}, logonly.KV(r.err)...)...)
		} else {
			klog.InfoS("Prometheus query returned warnings (partial data?)", "query", q.name, "warnings", r.warnings)
		}
	}
}

func (a *Adapter) reportSkipped(sk skipped, rej storage.Rejection) {
	for reason, n := range map[string]int{"unmapped": sk.unmapped, "duplicate": sk.duplicate, "partial": sk.partial} {
		if n > 0 {
			seriesSkipped.WithLabelValues(reason).Add(float64(n))
		}
	}
	switch a.series.Set(sk != (skipped{}) || rej.Total() > 0 || rej.Predecessor > 0) {
	case logonly.Began:
		klog.InfoS("Some Prometheus series cannot be served; will log again when all can", "unmapped", sk.unmapped,
			"duplicate", sk.duplicate, "partial", sk.partial, "invalid", rej.Invalid, "zero", rej.Zero,
			"implausible", rej.Implausible, "invalidSwap", rej.InvalidSwap, "predecessor", rej.Predecessor,
			"example", cmp.Or(rej.Example, rej.PredecessorPod))
	case logonly.Ended:
		klog.InfoS("Every Prometheus series can be served again")
	}
}
