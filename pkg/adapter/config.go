package adapter

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// config is prometheus-adapter's configuration file, of which metrics-ring uses the resourceRules block. The field
// names and their YAML keys are prometheus-adapter's (v0.12 pkg/config), so an operator's file loads unchanged.
type config struct {
	ResourceRules *resourceRules `json:"resourceRules,omitempty"`
	// Rules and ExternalRules serve custom.metrics.k8s.io and external.metrics.k8s.io, which metrics-ring does not:
	// they are accepted and ignored.
	Rules         []any `json:"rules,omitempty"`
	ExternalRules []any `json:"externalRules,omitempty"`
}

// resourceRules say how to query CPU, memory and swap of containers and nodes.
type resourceRules struct {
	CPU    resourceRule `json:"cpu"`
	Memory resourceRule `json:"memory"`
	// Swap is metrics-ring's own addition (prometheus-adapter has none): the swap usage in bytes, served as
	// usage.swap. Without it no swap is served.
	Swap *resourceRule `json:"swap,omitempty"`
	// Window is the averaging window of the CPU query, as served in NodeMetrics/PodMetrics.window. When empty, the
	// range of the CPU query's range vector is served.
	Window string `json:"window,omitempty"`
}

// resourceRule is the queries of one resource.
type resourceRule struct {
	// ContainerQuery and NodeQuery are Go templates with delimiters << >> over .Series, .LabelMatchers and
	// .GroupBy.
	ContainerQuery string          `json:"containerQuery"`
	NodeQuery      string          `json:"nodeQuery"`
	Resources      resourceMapping `json:"resources"`
	// ContainerLabel is the label holding the container name.
	ContainerLabel string `json:"containerLabel"`
}

// resourceMapping maps Prometheus labels to Kubernetes resources.
type resourceMapping struct {
	// Template renders a label name from .Group and .Resource, e.g. "kube_<<.Group>>_<<.Resource>>".
	Template string `json:"template,omitempty"`
	// Overrides maps a label name to the resource it names.
	Overrides  map[string]groupResource `json:"overrides,omitempty"`
	Namespaced *bool                    `json:"namespaced,omitempty"`
}

// groupResource names a Kubernetes resource.
type groupResource struct {
	Group    string `json:"group,omitempty"`
	Resource string `json:"resource"`
}

// defaultRules query the kubelet's /metrics/resource series. A Prometheus that also scrapes /metrics/cadvisor holds
// a second series of the same name and labels for every container (they differ only in labels such as id, image
// and the scrape's own), so the queries take max, not sum, over the duplicates: the same usage, not twice it.
func defaultRules() *resourceRules {
	mapping := resourceMapping{Overrides: map[string]groupResource{
		"namespace": {Resource: "namespace"}, "pod": {Resource: "pod"}, "node": {Resource: "node"},
	}}
	return &resourceRules{
		CPU: resourceRule{
			ContainerQuery: `max by (<<.GroupBy>>) (rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!="",container!="POD"}[1m]))`,
			NodeQuery:      `max by (<<.GroupBy>>) (rate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[1m]))`,
			Resources:      mapping,
			ContainerLabel: "container",
		},
		Memory: resourceRule{
			ContainerQuery: `max by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>,container!="",container!="POD"})`,
			NodeQuery:      `max by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})`,
			Resources:      mapping,
			ContainerLabel: "container",
		},
		Swap: &resourceRule{
			ContainerQuery: `max by (<<.GroupBy>>) (container_swap_usage_bytes{<<.LabelMatchers>>,container!="",container!="POD"})`,
			NodeQuery:      `max by (<<.GroupBy>>) (node_swap_usage_bytes{<<.LabelMatchers>>})`,
			Resources:      mapping,
			ContainerLabel: "container",
		},
	}
}

// loadConfig reads a prometheus-adapter configuration file; path "" gives the defaults. The file may also be the
// ConfigMap manifest that holds it (its data["config.yaml"]), as kube-prometheus ships it. Keys prometheus-adapter
// would reject are an error naming them; rules and externalRules are ignored with one log line.
func loadConfig(path string) (*config, error) {
	if path == "" {
		return &config{ResourceRules: defaultRules()}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading Prometheus config: %w", err)
	}
	cfg, err := parseConfig(data)
	if err != nil {
		//lint:ignore ST1005 Prometheus is a proper noun
		return nil, fmt.Errorf("Prometheus config %s: %w", path, err)
	}
	if n := len(cfg.Rules) + len(cfg.ExternalRules); n > 0 {
		klog.InfoS("Ignoring custom and external metrics rules: metrics-ring serves only metrics.k8s.io",
			"config", path, "rules", len(cfg.Rules), "externalRules", len(cfg.ExternalRules))
	}
	return cfg, nil
}

// configMap is the part of a ConfigMap manifest that holds an adapter config.
type configMap struct {
	Kind string            `json:"kind"`
	Data map[string]string `json:"data"`
}

// parseConfig parses the content of a configuration file (see loadConfig).
func parseConfig(data []byte) (*config, error) {
	var cm configMap
	if err := yaml.Unmarshal(data, &cm); err == nil && cm.Kind == "ConfigMap" {
		inner, ok := cm.Data["config.yaml"]
		if !ok {
			return nil, errors.New(`ConfigMap has no data["config.yaml"]`)
		}
		data = []byte(inner)
	}
	cfg := &config{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yaml.UnmarshalStrict(data, cfg); err != nil {
			return nil, fmt.Errorf("parsing: %w", err)
		}
	}
	if cfg.ResourceRules == nil {
		cfg.ResourceRules = defaultRules()
	}
	return cfg, nil
}

// window is the configured window, or 0 when the config gives none.
func (r *resourceRules) window() (time.Duration, error) {
	if r.Window == "" {
		return 0, nil
	}
	d, err := model.ParseDuration(r.Window)
	if err != nil {
		return 0, fmt.Errorf("resourceRules.window %q: %w", r.Window, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("resourceRules.window %q: must be positive", r.Window)
	}
	return time.Duration(d), nil
}
