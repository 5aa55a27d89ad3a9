package adapter

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
)

// query is one rendered cluster-wide PromQL query and how to read its result.
type query struct {
	name   string // e.g. "container cpu", for logs and metrics
	promql string
	// Labels that name the object of each result series: namespace, pod and container, or node.
	namespace, pod, container, node string
	// window is served as NodeMetrics/PodMetrics.window for CPU queries.
	window time.Duration
	// optional queries (swap) may return no data: a cluster without swap, or a Prometheus without the series.
	optional bool
}

// queries are the four queries of one poll, and the two swap queries when the config has a swap rule.
type queries struct {
	containerCPU, containerMemory, nodeCPU, nodeMemory query
	containerSwap, nodeSwap                            *query // nil without a swap rule
}

func (q *queries) all() []*query {
	all := []*query{&q.containerCPU, &q.containerMemory, &q.nodeCPU, &q.nodeMemory}
	if q.containerSwap != nil {
		all = append(all, q.containerSwap, q.nodeSwap)
	}
	return all
}

// templateData is what a prometheus-adapter query template sees.
type templateData struct {
	Series, LabelMatchers, GroupBy string
}

// compile renders every query of the rules cluster-wide and checks it parses as PromQL. prometheus-adapter renders
// <<.LabelMatchers>> as a per-pod name list (which grows into 414s on big namespaces); metrics-ring asks for every
// object at once, so LabelMatchers only requires the naming labels to be present: `namespace!="",pod!=""` or
// `node!=""`. That keeps `{<<.LabelMatchers>>,container!=""}` valid PromQL.
func compile(r *resourceRules) (*queries, error) {
	window, err := r.window()
	if err != nil {
		return nil, err
	}
	var q queries
	for _, c := range []struct {
		out       *query
		name      string
		rule      *resourceRule
		template  string
		node, cpu bool
	}{
		{&q.containerCPU, "container cpu", &r.CPU, r.CPU.ContainerQuery, false, true},
		{&q.containerMemory, "container memory", &r.Memory, r.Memory.ContainerQuery, false, false},
		{&q.nodeCPU, "node cpu", &r.CPU, r.CPU.NodeQuery, true, true},
		{&q.nodeMemory, "node memory", &r.Memory, r.Memory.NodeQuery, true, false},
	} {
		out, err := compileOne(c.name, c.rule, c.template, c.node)
		if err != nil {
			return nil, err
		}
		if c.cpu { // a rate: its window is served
			if window > 0 {
				out.window = window
			} else if out.window == 0 {
				return nil, fmt.Errorf("%s query has no range vector to take its window from: set resourceRules.window", c.name)
			}
		}
		*c.out = *out
	}
	if r.Swap != nil {
		if q.containerSwap, err = compileOne("container swap", r.Swap, r.Swap.ContainerQuery, false); err != nil {
			return nil, err
		}
		if q.nodeSwap, err = compileOne("node swap", r.Swap, r.Swap.NodeQuery, true); err != nil {
			return nil, err
		}
		q.containerSwap.optional, q.nodeSwap.optional = true, true
	}
	return &q, nil
}

func compileOne(name string, rule *resourceRule, text string, node bool) (*query, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("%s query is empty", name)
	}
	q := &query{name: name}
	var data templateData
	if node {
		l, err := labelFor(&rule.Resources, "node")
		if err != nil {
			return nil, fmt.Errorf("%s query: %w", name, err)
		}
		q.node = l
		data = templateData{LabelMatchers: l + `!=""`, GroupBy: l}
	} else {
		ns, err := labelFor(&rule.Resources, "namespace")
		if err != nil {
			return nil, fmt.Errorf("%s query: %w", name, err)
		}
		pod, err := labelFor(&rule.Resources, "pod")
		if err != nil {
			return nil, fmt.Errorf("%s query: %w", name, err)
		}
		if rule.ContainerLabel == "" {
			return nil, fmt.Errorf("%s query: containerLabel is not set", name)
		}
		q.namespace, q.pod, q.container = ns, pod, rule.ContainerLabel
		data = templateData{LabelMatchers: ns + `!="",` + pod + `!=""`, GroupBy: ns + "," + pod + "," + rule.ContainerLabel}
	}
	promql, err := render(name, text, data)
	if err != nil {
		return nil, err
	}
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(promql)
	if err != nil {
		return nil, fmt.Errorf("%s query renders to invalid PromQL %q: %w", name, promql, err)
	}
	q.promql = promql
	q.window = longestRange(expr)
	return q, nil
}

func render(name, text string, data any) (string, error) {
	t, err := template.New(name).Delims("<<", ">>").Option("missingkey=error").Parse(text)
	if err != nil {
		return "", fmt.Errorf("%s query template: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("%s query template: %w", name, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// longestRange is the longest range-vector or subquery range in the expression, the window a rate is taken over.
func longestRange(expr parser.Expr) time.Duration {
	var longest time.Duration
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch e := n.(type) {
		case *parser.MatrixSelector:
			longest = max(longest, e.Range)
		case *parser.SubqueryExpr:
			longest = max(longest, e.Range)
		}
		return nil
	})
	return longest
}

// labelFor finds the Prometheus label naming a resource: an override naming it (the alphabetically first, so the
// mapping is the same at every start, unlike prometheus-adapter's map order), else the rendered template.
func labelFor(m *resourceMapping, resource string) (string, error) {
	var found []string
	for label, gr := range m.Overrides {
		if (gr.Group == "" || gr.Group == "core") && singular(gr.Resource) == resource {
			found = append(found, label)
		}
	}
	if len(found) > 0 {
		slices.Sort(found)
		return found[0], nil
	}
	if m.Template != "" {
		label, err := render("resources.template", m.Template, struct{ Group, Resource string }{"", resource})
		if err != nil {
			return "", err
		}
		if label == "" {
			return "", fmt.Errorf("resources.template %q renders to an empty label for %s", m.Template, resource)
		}
		return label, nil
	}
	return "", fmt.Errorf("resources: no override or template names the label of %q", resource)
}

// singular accepts "pods" for "pod", as Kubernetes resource names are plural and adapter configs use both.
func singular(resource string) string {
	r := strings.ToLower(resource)
	switch r {
	case "pods", "nodes", "namespaces":
		return strings.TrimSuffix(r, "s")
	}
	return r
}
