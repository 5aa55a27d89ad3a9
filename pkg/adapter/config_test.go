package adapter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestRealConfigsRenderValidClusterWidePromQL(t *testing.T) {
	cases := []struct {
		file       string
		want       map[string]string // query name -> rendered PromQL (whitespace folded)
		wantWindow time.Duration
	}{
		{file: "kube-prometheus-configmap.yaml", wantWindow: 5 * time.Minute, want: map[string]string{
			"container cpu":    `sum by (namespace,pod,container) ( irate ( container_cpu_usage_seconds_total{namespace!="",pod!="",container!="",pod!=""}[4m] ) )`,
			"container memory": `sum by (namespace,pod,container) ( container_memory_working_set_bytes{namespace!="",pod!="",container!="",pod!=""} )`,
			"node cpu":         `sum by (node) ( irate( node_cpu_usage_seconds_total{node!=""}[4m] ) )`,
			"node memory":      `sum by (node) ( node_memory_working_set_bytes{node!=""} )`,
		}},
		{file: "sample-config-custom-rules-requoted.yaml", wantWindow: time.Minute, want: map[string]string{
			"container cpu": `max by (namespace,pod,container) (rate(container_cpu_usage_seconds_total{namespace!="",pod!="",container!="",container!="POD"}[1m]))`,
			"node memory":   `max by (node) (node_memory_working_set_bytes{node!=""})`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			cfg, err := loadConfig(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			q, err := compile(cfg.ResourceRules)
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range q.all() {
				if want, ok := tc.want[got.name]; ok && strings.Join(strings.Fields(got.promql), " ") != want {
					t.Errorf("%s:\n got %s\nwant %s", got.name, got.promql, want)
				}
			}
			if q.containerCPU.window != tc.wantWindow || q.nodeCPU.window != tc.wantWindow {
				t.Errorf("windows %s/%s, want %s", q.containerCPU.window, q.nodeCPU.window, tc.wantWindow)
			}
			if q.containerCPU.namespace != "namespace" || q.containerCPU.pod != "pod" || q.containerCPU.container != "container" || q.nodeCPU.node != "node" {
				t.Errorf("label mapping %+v %+v", q.containerCPU, q.nodeCPU)
			}
		})
	}
}

func TestInvalidYAMLIsAnErrorNamingTheLine(t *testing.T) {
	// The sample config as shipped is not valid YAML (see testdata/README.md); prometheus-adapter rejects it too.
	_, err := loadConfig(filepath.Join("testdata", "sample-config-custom-rules.yaml"))
	if err == nil || !strings.Contains(err.Error(), "sample-config-custom-rules.yaml") || !strings.Contains(err.Error(), "line 29") {
		t.Fatalf("error = %v, want one naming the file and the line", err)
	}
}

func TestConfigErrorsNameTheProblem(t *testing.T) {
	rules := func(cpuContainer string) string {
		return `resourceRules:
  cpu:
    containerQuery: '` + cpuContainer + `'
    nodeQuery: 'sum by (<<.GroupBy>>) (rate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[2m]))'
    resources: {template: "<<.Resource>>"}
    containerLabel: container
  memory:
    containerQuery: 'sum by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>})'
    nodeQuery: 'sum by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})'
    resources: {overrides: {kube_pod: {resource: pods}, ns: {resource: namespace}, instance: {resource: node}}}
    containerLabel: container
`
	}
	cases := []struct{ name, config, wantErr string }{
		{"unknown key", "resourceRules:\n  cpu: {containerQeury: x}\n", "containerQeury"},
		{"unknown top-level key", "resourceRule: {}\n", "resourceRule"},
		{"template does not parse", rules(`sum(rate(x{<<.LabelMatchers>}[1m]))`), "container cpu query template"},
		{"unknown template field", rules(`sum(rate(x{<<.Labels>>}[1m]))`), "container cpu query template"},
		{"invalid PromQL", rules(`sum(rate(x{<<.LabelMatchers>>}[1m])`), "invalid PromQL"},
		{"no window to serve", rules(`sum by (<<.GroupBy>>) (my_recorded_rate{<<.LabelMatchers>>})`), "set resourceRules.window"},
		{"bad window", "resourceRules:\n  window: fivemin\n", "resourceRules.window"},
		{"ConfigMap without config.yaml", "kind: ConfigMap\ndata: {other.yaml: x}\n", "config.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := New(Options{ConfigFile: path, ClientOptions: ClientOptions{URL: "http://127.0.0.1:1", Timeout: time.Second}})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}

func TestLabelMappingFromTemplateAndPluralOverrides(t *testing.T) {
	m := &resourceMapping{Template: "kube_<<.Resource>>", Overrides: map[string]groupResource{
		"exported_pod": {Resource: "pods"}, "a_pod": {Resource: "pod"}, "x": {Group: "apps", Resource: "pod"}}}
	for resource, want := range map[string]string{"pod": "a_pod", "namespace": "kube_namespace", "node": "kube_node"} {
		for i := 0; i < 20; i++ { // map order varies between iterations; the answer must not
			if got, err := labelFor(m, resource); err != nil || got != want {
				t.Fatalf("labelFor(%s) = %q, %v; want %q", resource, got, err, want)
			}
		}
	}
	if _, err := labelFor(&resourceMapping{}, "pod"); err == nil {
		t.Error("a mapping with neither template nor override must be an error")
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"kube-prometheus-configmap.yaml", "sample-config-custom-rules.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// A config that parses, written back, parses to the same rules and renders the same queries (or fails to
	// compile as it did): nothing an operator wrote is lost or changed on the way to PromQL.
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseConfig(data)
		if err != nil {
			return
		}
		qs, err := compile(cfg.ResourceRules)
		out, mErr := yaml.Marshal(config{ResourceRules: cfg.ResourceRules})
		if mErr != nil {
			t.Fatalf("the parsed rules %+v do not write back: %v", cfg.ResourceRules, mErr)
		}
		again, pErr := parseConfig(out)
		if pErr != nil {
			t.Fatalf("the parsed rules, written back as\n%s\ndo not parse: %v", out, pErr)
		}
		qs2, err2 := compile(again.ResourceRules)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("compiling: %v; written back as\n%s\ncompiling: %v", err, out, err2)
		}
		if err != nil {
			return
		}
		for i, q := range qs.all() {
			if i >= len(qs2.all()) || *q != *qs2.all()[i] {
				t.Fatalf("query %s renders %+v; written back as\n%s\nit renders %+v", q.name, *q, out, qs2.all())
			}
		}
		if len(qs.all()) != len(qs2.all()) {
			t.Fatalf("%d queries; written back as\n%s\n%d", len(qs.all()), out, len(qs2.all()))
		}
	})
}

func TestPrometheusOverlayConfigIsTheDefaults(t *testing.T) {
	// The ConfigMap an operator starts from must say what metrics-ring does without one.
	cfg, err := loadConfig(filepath.Join("..", "..", "manifests", "overlays", "prometheus", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := compile(cfg.ResourceRules)
	if err != nil {
		t.Fatal(err)
	}
	want, err := compile(defaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.all()) != len(want.all()) {
		t.Fatalf("overlay has %d queries, defaults %d", len(got.all()), len(want.all()))
	}
	for i, q := range got.all() {
		if w := want.all()[i]; *q != *w {
			t.Errorf("%s: overlay renders %+v, defaults %+v", q.name, *q, *w)
		}
	}
}
