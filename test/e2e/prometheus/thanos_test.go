package prometheus

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

const (
	thanosService = "metrics-ring-thanos"
	thanosIP      = "127.0.0.4"
	// thanosWindow is the range of the Thanos backend's CPU queries: unlike the other backends' windows, so the
	// window of an answer tells that this backend served it.
	thanosWindow  = 2 * time.Minute
	queryWarnings = "metrics_ring_prometheus_query_warnings_total"
	// warnedLog and recoveredLog start the adapter's log lines for a query's warning streak and its end.
	warnedLog    = "Prometheus query returned warnings"
	recoveredLog = "Prometheus query recovered"
)

// thanosConfig is a prometheus-adapter config, as an operator would bring it, with the defaults' queries over
// [2m] instead of [1m] (see thanosWindow).
const thanosConfig = `resourceRules:
  cpu:
    containerQuery: max by (<<.GroupBy>>) (rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!="",container!="POD"}[2m]))
    nodeQuery: max by (<<.GroupBy>>) (rate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[2m]))
    resources: &resources
      overrides:
        namespace: {resource: namespace}
        pod: {resource: pod}
        node: {resource: node}
    containerLabel: container
  memory:
    containerQuery: max by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>,container!="",container!="POD"})
    nodeQuery: max by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})
    resources: *resources
    containerLabel: container
  swap:
    containerQuery: max by (<<.GroupBy>>) (container_swap_usage_bytes{<<.LabelMatchers>>,container!="",container!="POD"})
    nodeQuery: max by (<<.GroupBy>>) (node_swap_usage_bytes{<<.LabelMatchers>>})
    resources: *resources
    containerLabel: container
`

// TestThanosQuery serves the API from a second Prometheus-compatible store: Thanos Query in front of the same
// Prometheus through a Thanos sidecar, read by a third metrics-ring backend with --source=prometheus. kubectl top
// and client-go see the truth. Then the Query gets a second store that is down: its answers carry partial-response
// warnings, which the backend counts in metrics_ring_prometheus_query_warnings_total and logs once per query per
// streak, naming the store, while it keeps serving the truth (the sidecar's data is whole). Without the dead store
// every query logs its recovery. Last, with the sidecar stopped too, Thanos answers 200 with no data: that is
// never served as an empty list but, after --stale-after, as the 503 of an outage.
func TestThanosQuery(t *testing.T) {
	ctx := context.Background()
	th, err := framework.StartThanos(framework.ThanosConfig{Binary: env.thanosBin, Dir: filepath.Join(env.cp.Dir, "thanos"),
		Prometheus: env.prom, Out: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			th.Query.DumpTail(os.Stderr, 30)
			th.Sidecar.DumpTail(os.Stderr, 30)
		}
		th.Stop()
	})
	if err := th.WaitReady(ctx, "node_memory_working_set_bytes", settle); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(env.cp.Dir, "thanos", "adapter-config.yaml")
	if err := os.WriteFile(cfgFile, []byte(thanosConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := env.api.StartBackend(ctx, framework.BackendConfig{
		Service: thanosService, IP: thanosIP, Resolution: resolution,
		Args: []string{"--source=prometheus", "--prometheus-url=" + th.URL, "--prometheus-config=" + cfgFile,
			"--prometheus-query-timeout=" + queryTimeout.String(), "--stale-after=" + staleAfter.String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Proc.Stop(10 * time.Second) })
	if err := b.WaitReady(ctx, settle); err != nil {
		t.Fatal(err)
	}
	pointAPIService(t, thanosService)
	t.Cleanup(func() { pointAPIService(t, kubeletService) })

	framework.Eventually(t, "the Prometheus source reading Thanos Query to serve the truth through the aggregator", warmup, servesTruthFrom(thanosService))
	framework.Eventually(t, "kubectl top nodes and pods -A to print the truth", settle, topMatchesTruth)
	if n := selfMetrics(t, b).Sum(queryWarnings, nil); n != 0 {
		t.Errorf("%s counted %g query warnings with every store up, want 0", queryWarnings, n)
	}

	t.Run("a store down gives warnings, counted and logged, and the data is still served", func(t *testing.T) {
		port, err := framework.FreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) // nothing listens there
		logFrom := logSize(t, b)
		if err := th.SetUnreachableStore(dead); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = th.SetUnreachableStore("") })
		framework.Eventually(t, "Thanos Query to answer with a warning about the store at "+dead, settle, func(ctx context.Context) error {
			w, err := th.Warnings(ctx, "node_memory_working_set_bytes")
			if err != nil {
				return err
			}
			if !strings.Contains(strings.Join(w, "\n"), dead) {
				return fmt.Errorf("warnings %q, want one naming %s", w, dead)
			}
			return nil
		})
		// Reads of /metrics that each find more warnings than the one before: every poll counts them.
		var last float64
		for i := range 3 {
			framework.Eventually(t, fmt.Sprintf("%s to grow (read %d)", queryWarnings, i+1), settle, func(ctx context.Context) error {
				m, err := b.SelfMetrics(ctx)
				if err != nil {
					return err
				}
				n := m.Sum(queryWarnings, nil)
				if n <= last {
					return fmt.Errorf("%s is %g, was %g", queryWarnings, n, last)
				}
				last = n
				return nil
			})
		}
		framework.Eventually(t, "the truth still served through the aggregator while a store is down", settle, servesTruthFrom(thanosService))
		framework.Eventually(t, "kubectl top to still print the truth while a store is down", settle, topMatchesTruth)
		queries := len(queryOutcomes(selfMetrics(t, b)))
		lines := logLines(t, b, logFrom, warnedLog)
		if len(lines) == 0 || len(lines) > queries {
			t.Errorf("%s logged %d %q lines while a store was down, want 1 to %d (once per query per streak):\n%s",
				b.Service, len(lines), warnedLog, queries, strings.Join(lines, "\n"))
		}
		for _, l := range lines {
			if !strings.Contains(l, dead) {
				t.Errorf("the warning line does not name the store that is down (%s): %s", dead, l)
			}
		}

		logFrom = logSize(t, b)
		if err := th.SetUnreachableStore(""); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, "every warned query to log its recovery once the dead store is gone", settle, func(context.Context) error {
			if got := len(logLines(t, b, logFrom, recoveredLog)); got < len(lines) {
				return fmt.Errorf("%d %q lines, want %d (one per query that warned)", got, recoveredLog, len(lines))
			}
			return nil
		})
	})

	t.Run("every store down is a 503, not an empty answer", func(t *testing.T) {
		before := queryOutcomes(selfMetrics(t, b))
		for q := range before {
			if strings.HasSuffix(q, " swap") {
				delete(before, q) // optional: no data is no swap, not a failure
			}
		}
		logFrom := logSize(t, b)
		th.Sidecar.Stop(10 * time.Second)
		o := outage{backend: b, source: "prometheus", reason: "no data",
			logged: "Prometheus query failed", streaks: len(before), logFrom: logFrom,
			failing: failedSince(before, "the sidecar stopped")}
		o.servesLastGoodData(t)
		o.unavailable(t)
		o.loggedOncePerStreak(t)
	})
}

// logLines returns the lines of b's log after offset from that contain what.
func logLines(t *testing.T, b *framework.Backend, from int64, what string) []string {
	t.Helper()
	data, err := os.ReadFile(b.Proc.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(data[min(from, int64(len(data))):]), "\n") {
		if strings.Contains(l, what) {
			lines = append(lines, l)
		}
	}
	return lines
}
