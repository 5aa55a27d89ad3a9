package prometheus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// outage is what a user and the cluster must see while the source of the backend the APIService points at
// fails (DESIGN.md section 3): the failure in its /metrics at once, the last good data until --stale-after,
// then a 503 naming the source and its error, and all along an Available APIService and clean discovery.
type outage struct {
	backend *framework.Backend
	// source is how the 503 names the source ("prometheus", "kubelet"); reason is part of its error.
	source, reason string
	// failing says why the backend's /metrics do not show the failure yet, or nil once they do.
	failing func(framework.SelfMetrics) error
	// logged is the start of the backend's error line for one failing query or node; streaks is how many
	// queries or nodes fail, so how many such lines the outage may log (once per failure streak each).
	logged  string
	streaks int
	// logFrom is the backend log's size before the outage.
	logFrom int64
}

// logSize is the size of a backend's log: what an outage's log check reads from.
func logSize(t *testing.T, b *framework.Backend) int64 {
	t.Helper()
	fi, err := os.Stat(b.Proc.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// selfMetrics reads b's own /metrics, failing the test if it cannot.
func selfMetrics(t *testing.T, b *framework.Backend) framework.SelfMetrics {
	t.Helper()
	m, err := b.SelfMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// servesLastGoodData waits until the failure shows in the backend's /metrics, then checks that the aggregator
// still answers with the last good data, which is the truth: the simulator's usage does not change.
// staleAfter leaves seconds between the two; a 503 here means the data was dropped before --stale-after.
func (o outage) servesLastGoodData(t *testing.T) {
	t.Helper()
	framework.Eventually(t, "the failure of the "+o.source+" source to show in "+o.backend.Service+"'s /metrics", settle, func(ctx context.Context) error {
		m, err := o.backend.SelfMetrics(ctx)
		if err != nil {
			return err
		}
		if err := o.failing(m); err != nil {
			return err
		}
		s, err := viaAggregator(ctx)
		if err != nil && o.check503(err) != nil {
			return err // not the source's 503: a transient error of the aggregator or the client, try again
		}
		if err == nil {
			err = matchTruth(s, env.sim.Truth())
		}
		if err != nil {
			return framework.StopPolling(fmt.Errorf("the failure shows in /metrics, but the last good data is not served "+
				"(--stale-after=%s): %w", staleAfter, err))
		}
		return nil
	})
}

// unavailable waits for list and get of both kinds to answer 503 through the aggregator, naming the source and
// its error, then checks kubectl top prints that, kubectl get apiservice still shows Available=True and
// kubectl api-resources still succeeds without a discovery error.
func (o outage) unavailable(t *testing.T) {
	t.Helper()
	p := env.sim.Pods()[0]
	framework.Eventually(t, fmt.Sprintf("list and get to answer 503 naming %s and %q", o.source, o.reason), settle+staleAfter, func(ctx context.Context) error {
		m := env.metrics.MetricsV1beta1()
		_, errPods := m.PodMetricses("").List(ctx, metav1.ListOptions{})
		_, errNodes := m.NodeMetricses().List(ctx, metav1.ListOptions{})
		_, errPod := m.PodMetricses(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		_, errNode := m.NodeMetricses().Get(ctx, p.Node, metav1.GetOptions{})
		var errs []error
		for what, err := range map[string]error{"list pods": errPods, "list nodes": errNodes, "get pod": errPod, "get node": errNode} {
			if err := o.check503(err); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
			}
		}
		return errors.Join(errs...)
	})
	ctx := context.Background()
	for _, args := range [][]string{{"top", "nodes"}, {"top", "pods", "-A"}} {
		// Retried: under load one cycle's error may be a timeout rather than the outage's own reason.
		framework.Eventually(t, "kubectl "+strings.Join(args, " ")+" to print the 503", settle, func(ctx context.Context) error {
			out, err := env.cp.Kubectl(ctx, "", args...)
			if err == nil || !strings.Contains(out, "(ServiceUnavailable)") || !strings.Contains(out, o.source) || !strings.Contains(out, o.reason) {
				return fmt.Errorf("kubectl %s during the outage: err %v, want a ServiceUnavailable error naming %s and %q; output:\n%s",
					strings.Join(args, " "), err, o.source, o.reason, out)
			}
			t.Logf("kubectl %s during the outage: %s", strings.Join(args, " "), firstLine(out))
			return nil
		})
	}
	// The rest of the cluster must not notice.
	for _, name := range framework.APIServiceNames {
		out, err := env.cp.Kubectl(ctx, "", "get", "apiservice", name, "--no-headers")
		if f := strings.Fields(out); err != nil || len(f) < 3 || f[0] != name || f[1] != "kube-system/"+o.backend.Service || f[2] != "True" {
			t.Errorf("kubectl get apiservice during the outage: err %v, want %s pointing at kube-system/%s, AVAILABLE True; output:\n%s",
				err, name, o.backend.Service, out)
		}
	}
	stdout, stderr, err := env.cp.KubectlStreams(ctx, "", "", "api-resources")
	if err != nil || stderr != "" {
		t.Errorf("kubectl api-resources during the outage: err %v, want exit 0 and nothing on stderr; stderr:\n%s", err, stderr)
	}
	var kinds []string
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[len(f)-3] == "metrics.k8s.io/v1" { // the preferred version
			kinds = append(kinds, f[len(f)-1])
		}
	}
	if strings.Join(kinds, " ") != "NodeMetrics PodMetrics" {
		t.Errorf("kubectl api-resources during the outage listed metrics.k8s.io kinds %v, want NodeMetrics PodMetrics; output:\n%s", kinds, stdout)
	}
}

// loggedOncePerStreak checks the backend's log since the outage began: at least one error line saying what
// failed and why, and no more than one per failing query or node, although every cycle since has failed.
func (o outage) loggedOncePerStreak(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(o.backend.Proc.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(data[min(o.logFrom, int64(len(data))):]), "\n") {
		if strings.HasPrefix(l, "E") && strings.Contains(l, o.logged) {
			lines = append(lines, l)
		}
	}
	named := 0
	for _, l := range lines {
		if strings.Contains(l, o.reason) {
			named++
		}
	}
	if named == 0 || len(lines) > o.streaks {
		t.Errorf("%s logged %d %q error lines (%d naming %q) during the outage, want 1 to %d (once per failure streak):\n%s",
			o.backend.Service, len(lines), o.logged, named, o.reason, o.streaks, strings.Join(lines, "\n"))
	}
}

// firstLine is the first line of s, for logs.
func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// check503 checks that err is a 503 ServiceUnavailable whose message names the source and its error.
func (o outage) check503(err error) error {
	switch {
	case err == nil:
		return errors.New("answered 200, want 503 ServiceUnavailable")
	case !apierrors.IsServiceUnavailable(err):
		return fmt.Errorf("answered %v (reason %q), want 503 ServiceUnavailable", err, apierrors.ReasonForError(err))
	case !strings.Contains(err.Error(), o.source+" source") || !strings.Contains(err.Error(), o.reason):
		return fmt.Errorf("503 %q does not name the %s source and %q", err, o.source, o.reason)
	}
	return nil
}
