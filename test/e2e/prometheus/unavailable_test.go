package prometheus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

const (
	queriesTotal  = "metrics_ring_prometheus_queries_total"
	requestsTotal = "metrics_ring_kubelet_requests_total"
	nodeUp        = "metrics_ring_kubelet_node_up"
)

// TestPrometheusDown stops Prometheus under the serving backend. Every query's failure shows in
// metrics_ring_prometheus_queries_total, and is logged once, while the last good data is still served; after
// --stale-after, list and get through the aggregator answer 503 naming Prometheus and the connection error
// (kubectl top prints it), never an empty list, while the APIService stays Available and discovery stays
// clean, so the rest of the cluster is unaffected. Prometheus restarted on the same data directory and port
// brings the answers back.
func TestPrometheusDown(t *testing.T) {
	usePrometheus(t)
	framework.Eventually(t, "the Prometheus source to serve the truth", warmup, func(ctx context.Context) error {
		s, err := viaAggregator(ctx)
		if err != nil {
			return err
		}
		return matchTruth(s, env.sim.Truth())
	})
	before := queryOutcomes(selfMetrics(t, env.prometheus))
	if len(before) == 0 {
		t.Fatalf("%s has no %s series after serving the truth", env.prometheus.Service, queriesTotal)
	}

	logFrom := logSize(t, env.prometheus)
	env.prom.Stop()
	// Registered after usePrometheus, so it runs first: Prometheus is back before the APIService swaps back.
	t.Cleanup(func() {
		if exited, _ := env.prom.Proc.Exited(); exited {
			if err := env.prom.Start(); err != nil {
				t.Errorf("restarting prometheus: %v", err)
				return
			}
		}
		if err := env.prom.WaitReady(context.Background(), settle); err != nil {
			t.Errorf("prometheus after restart: %v", err)
		}
	})

	o := outage{backend: env.prometheus, source: "prometheus", reason: "connection refused",
		logged: "Prometheus query failed", streaks: len(before), logFrom: logFrom,
		failing: failedSince(before, "Prometheus stopped")}
	o.servesLastGoodData(t)
	o.unavailable(t)
	o.loggedOncePerStreak(t)

	if err := env.prom.Start(); err != nil {
		t.Fatalf("restarting prometheus: %v", err)
	}
	if err := env.prom.WaitReady(context.Background(), settle); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "kubectl top to answer again after Prometheus restarted", settle, topMatchesTruth)
	failedBefore := queryOutcomes(selfMetrics(t, env.prometheus))
	framework.Eventually(t, "every query to succeed again in /metrics", settle, func(ctx context.Context) error {
		m, err := env.prometheus.SelfMetrics(ctx)
		if err != nil {
			return err
		}
		var errs []error
		for q, now := range queryOutcomes(m) {
			if now.succeeded <= failedBefore[q].succeeded {
				errs = append(errs, fmt.Errorf("query %q has not succeeded since kubectl top answered again", q))
			}
		}
		return errors.Join(errs...)
	})
}

// TestKubeletEveryNodeFails makes every simulated kubelet answer 500 (as a network policy or lost RBAC would
// fail them all) under the kubelet backend: the same as a Prometheus outage, with the failure in
// metrics_ring_kubelet_node_up and metrics_ring_kubelet_requests_total, one log line per node, and the 503
// naming the kubelet source and the kubelets' status.
func TestKubeletEveryNodeFails(t *testing.T) {
	pointAPIService(t, kubeletService)
	framework.Eventually(t, "the kubelet source to serve the truth", settle, func(ctx context.Context) error {
		s, err := viaAggregator(ctx)
		if err != nil {
			return err
		}
		return matchTruth(s, env.sim.Truth())
	})
	failuresBefore := failedRequests(selfMetrics(t, env.kubelet))

	nodes := env.sim.Nodes()
	logFrom := logSize(t, env.kubelet)
	for _, n := range nodes {
		env.sim.SetNodeFault(n, kubeletsim.Fault{Status: 500, Body: []byte("kubeletsim: every node made to fail")})
	}
	healed := false
	heal := func() {
		for _, n := range nodes {
			env.sim.SetNodeFault(n, kubeletsim.Fault{})
		}
		healed = true
	}
	t.Cleanup(func() {
		if !healed {
			heal()
		}
	})

	o := outage{backend: env.kubelet, source: "kubelet", reason: "status 500",
		logged: "Failed to scrape node", streaks: len(nodes), logFrom: logFrom,
		failing: func(m framework.SelfMetrics) error {
			var errs []error
			if got := failedRequests(m) - failuresBefore; got < float64(len(nodes)) {
				errs = append(errs, fmt.Errorf("%s{outcome!=success} grew by %g, want at least one per node (%d)", requestsTotal, got, len(nodes)))
			}
			errs = append(errs, nodesUp(m, nodes, 0))
			return errors.Join(errs...)
		}}
	o.servesLastGoodData(t)
	o.unavailable(t)
	o.loggedOncePerStreak(t)

	heal()
	framework.Eventually(t, "kubectl top to answer again once the kubelets answer", settle, topMatchesTruth)
	framework.Eventually(t, "every node up again in /metrics", settle, func(ctx context.Context) error {
		m, err := env.kubelet.SelfMetrics(ctx)
		if err != nil {
			return err
		}
		return nodesUp(m, nodes, 1)
	})
}

// outcomes counts one query's polls.
type outcomes struct{ succeeded, failed float64 }

// queryOutcomes reads metrics_ring_prometheus_queries_total by query: successes, and every other outcome
// (error, timeout) as failures.
func queryOutcomes(m framework.SelfMetrics) map[string]outcomes {
	out := map[string]outcomes{}
	for _, s := range m.Series(queriesTotal, nil) {
		q, o := framework.Label(s, "query"), out[framework.Label(s, "query")]
		if framework.Label(s, "outcome") == "success" {
			o.succeeded += s.GetCounter().GetValue()
		} else {
			o.failed += s.GetCounter().GetValue()
		}
		out[q] = o
	}
	return out
}

// failedSince says which queries have not failed more than they had before event.
func failedSince(before map[string]outcomes, event string) func(framework.SelfMetrics) error {
	return func(m framework.SelfMetrics) error {
		now := queryOutcomes(m)
		var errs []error
		for q, b := range before {
			if now[q].failed <= b.failed {
				errs = append(errs, fmt.Errorf("query %q: %g failures, as before %s", q, now[q].failed, event))
			}
		}
		return errors.Join(errs...)
	}
}

// failedRequests sums metrics_ring_kubelet_requests_total over its failure outcomes (error and timeout: under
// load an answer that fails fast may still come too late).
func failedRequests(m framework.SelfMetrics) float64 {
	return m.Sum(requestsTotal, map[string]string{"outcome": "error"}) + m.Sum(requestsTotal, map[string]string{"outcome": "timeout"})
}

// nodesUp checks that metrics_ring_kubelet_node_up is want for every node.
func nodesUp(m framework.SelfMetrics, nodes []string, want float64) error {
	var errs []error
	for _, n := range nodes {
		s := m.Series(nodeUp, map[string]string{"node": n})
		if len(s) != 1 || s[0].GetGauge().GetValue() != want {
			errs = append(errs, fmt.Errorf("%s{node=%q}: %v, want %g", nodeUp, n, s, want))
		}
	}
	return errors.Join(errs...)
}
