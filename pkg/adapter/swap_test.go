package adapter

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// swapOf prints a served swap value: "-" when there is none.
func swapOf(bytes uint64, ok bool) string {
	if !ok {
		return "-"
	}
	return strconv.FormatUint(bytes, 10)
}

// noSwapConfig is the defaults' cpu and memory rules without a swap rule, as prometheus-adapter configs are.
const noSwapConfig = `resourceRules:
  cpu:
    containerQuery: max by (<<.GroupBy>>) (rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!=""}[1m]))
    nodeQuery: max by (<<.GroupBy>>) (rate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[1m]))
    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}, node: {resource: node}}}
    containerLabel: container
  memory:
    containerQuery: max by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>,container!=""})
    nodeQuery: max by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})
    resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}, node: {resource: node}}}
    containerLabel: container
`

func TestSwap(t *testing.T) {
	withSwap := func() map[string][]series {
		r := healthyResults()
		// app swaps 1 MiB (twice: a Prometheus scraping /metrics/cadvisor too has duplicates); sidecar nothing.
		r["container_swap_usage_bytes"] = []series{ctrSeries("ns", "p", "app", "1048576"),
			ctrSeries("ns", "p", "app", "1048576"), ctrSeries("ns", "p", "sidecar", "0")}
		r["node_swap_usage_bytes"] = []series{nodeSeries("n1", "2097152")}
		return r
	}
	cases := []struct {
		name    string
		config  string // "" for the defaults
		results func() map[string][]series
		swapErr bool // the swap queries fail
		// Served swap of node n1 and containers app and sidecar.
		node, app, sidecar string
		requests           int
		failed             bool // the cycle is not a success
	}{
		{name: "defaults read the kubelet's swap series; 0 is served as 0",
			results: withSwap, node: "2097152", app: "1048576", sidecar: "0", requests: 6},
		{name: "no swap series (a cluster without swap): none served, the cycle succeeds",
			results: healthyResults, node: "-", app: "-", sidecar: "-", requests: 6},
		{name: "a failing swap query loses the swap alone; its error is the cycle's, the collection succeeds",
			results: withSwap, swapErr: true, node: "-", app: "-", sidecar: "-", requests: 6},
		{name: "a config without a swap rule serves no swap and does not ask",
			config: noSwapConfig, results: withSwap, node: "-", app: "-", sidecar: "-", requests: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{}
			if tc.config != "" {
				o.ConfigFile = filepath.Join(t.TempDir(), "config.yaml")
				if err := os.WriteFile(o.ConfigFile, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			h := newHarness(t, o)
			h.prom.results = tc.results()
			if tc.swapErr {
				h.prom.results["container_swap_usage_bytes"] = nil
				h.prom.results["node_swap_usage_bytes"] = nil
				h.prom.failing = map[string]int{"container_swap_usage_bytes": http.StatusUnprocessableEntity,
					"node_swap_usage_bytes": http.StatusUnprocessableEntity}
			}
			h.poll(0)
			if len(h.prom.requests) != tc.requests {
				t.Errorf("%d requests, want %d", len(h.prom.requests), tc.requests)
			}
			health := h.store.Latest().Health()
			if (health.LastSuccess.IsZero()) || (health.LastError != nil) != tc.swapErr {
				t.Errorf("health %+v: want a success, with an error only when swap failed", health)
			}
			n, ok := h.store.Latest().Node("n1")
			if !ok {
				t.Fatal("node not served")
			}
			p, ok := h.store.Latest().Pod("ns", "p")
			if !ok || len(p.Containers()) != 2 {
				t.Fatalf("pod not served: %+v", p)
			}
			if n.CPU != 1_500_000_000 || p.Containers()[0].CPU != 123_456_789 {
				t.Errorf("cpu of node %d, app %d: swap must not change cpu and memory", n.CPU, p.Containers()[0].CPU)
			}
			got := []string{swapOf(n.Swap()), swapOf(p.Containers()[0].Swap()), swapOf(p.Containers()[1].Swap())}
			if want := []string{tc.node, tc.app, tc.sidecar}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
				t.Errorf("swap of node, app, sidecar = %v, want %v", got, want)
			}
		})
	}
}
