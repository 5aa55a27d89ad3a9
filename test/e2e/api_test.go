package e2e

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

func TestKubectlGetMetricsTables(t *testing.T) {
	framework.Eventually(t, "kubectl get nodes.metrics.k8s.io to list every node as a table", settle, func(ctx context.Context) error {
		out, err := env.cp.Kubectl(ctx, "", "get", "nodes.metrics.k8s.io")
		if err != nil {
			return err
		}
		header, rows, err := framework.Table(out, 1)
		if err != nil {
			return err
		}
		if err := checkHeader(header, "NAME", "CPU", "MEMORY", "WINDOW"); err != nil {
			return err
		}
		return sameKeys(rows, env.sim.Truth().Nodes)
	})
	framework.Eventually(t, "kubectl get podmetrics -A to list every pod as a table", settle, func(ctx context.Context) error {
		out, err := env.cp.Kubectl(ctx, "", "get", "podmetrics", "-A")
		if err != nil {
			return err
		}
		header, rows, err := framework.Table(out, 2)
		if err != nil {
			return err
		}
		if err := checkHeader(header, "NAMESPACE", "NAME", "CPU", "MEMORY", "WINDOW"); err != nil {
			return err
		}
		return sameKeys(rows, env.sim.Truth().Pods)
	})
}

func sameKeys[V any](rows map[string][]string, want map[string]V) error {
	var errs []error
	for k := range want {
		if _, ok := rows[k]; !ok {
			errs = append(errs, fmt.Errorf("%s missing", k))
		}
	}
	for k := range rows {
		if _, ok := want[k]; !ok {
			errs = append(errs, fmt.Errorf("unexpected %s", k))
		}
	}
	return errors.Join(errs...)
}

// TestKubectlExplainPodMetricsContainers: kubectl explain reads the OpenAPI v3 of either version, v1 by default
// (the preferred one).
func TestKubectlExplainPodMetricsContainers(t *testing.T) {
	for _, tc := range []struct{ version, flag string }{{"v1", ""}, {"v1", "--api-version=metrics.k8s.io/v1"}, {"v1beta1", "--api-version=metrics.k8s.io/v1beta1"}} {
		args := []string{"explain", "podmetrics.containers"}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		out, err := env.cp.Kubectl(context.Background(), "", args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"GROUP:", "metrics.k8s.io", "KIND:", "PodMetrics", "VERSION:", "FIELD: containers", "usage", "name"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl %s lacks %q:\n%s", strings.Join(args, " "), want, out)
			}
		}
		if !regexp.MustCompile(`(?m)^VERSION:\s+` + tc.version + `$`).MatchString(out) {
			t.Errorf("kubectl %s explains another version than %s:\n%s", strings.Join(args, " "), tc.version, out)
		}
	}
}

func TestKubectlAPIResources(t *testing.T) {
	out, err := env.cp.Kubectl(context.Background(), "", "api-resources", "--api-group=metrics.k8s.io", "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	// Columns: NAME [SHORTNAMES] APIVERSION NAMESPACED KIND; SHORTNAMES may be empty, so read from the right.
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			t.Fatalf("unexpected api-resources line %q in:\n%s", l, out)
		}
		got[f[0]] = strings.Join(f[len(f)-3:], " ")
	}
	want := map[string]string{
		"nodes": "metrics.k8s.io/v1 false NodeMetrics", // the preferred version
		"pods":  "metrics.k8s.io/v1 true PodMetrics",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("api-resources %s: got %q, want %q\n%s", name, got[name], w, out)
		}
	}
	if len(got) != len(want) {
		t.Errorf("api-resources lists %d resources, want %d:\n%s", len(got), len(want), out)
	}
}
