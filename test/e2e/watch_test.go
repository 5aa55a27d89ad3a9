package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// nextEvent returns the watch's next event, or fails the test after timeout (a bound, not a measurement).
func nextEvent(t *testing.T, w watch.Interface, timeout time.Duration) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch closed")
		}
		return ev
	case <-time.After(timeout):
		t.Fatalf("no watch event within %v", timeout)
	}
	return watch.Event{}
}

// TestWatchThroughAggregator watches with client-go through kube-apiserver: ADDED for every node, MODIFIED with
// the truth's new value after a workload change, a resume from a list's resourceVersion, and 410 Gone for one
// this server never had.
func TestWatchThroughAggregator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := env.metrics.MetricsV1beta1()
	// Served values settle first, so the watch starts from complete data.
	framework.Eventually(t, "every node served", settle, func(ctx context.Context) error {
		l, err := c.NodeMetricses().List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) != len(env.sim.Nodes()) {
			err = fmt.Errorf("%d of %d nodes", len(l.Items), len(env.sim.Nodes()))
		}
		return err
	})

	w, err := c.NodeMetricses().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	added := map[string]bool{}
	for len(added) < len(env.sim.Nodes()) {
		ev := nextEvent(t, w, settle)
		n, ok := ev.Object.(*metricsv1beta1.NodeMetrics)
		if ev.Type != watch.Added || !ok {
			t.Fatalf("want ADDED for every node first, got %s %T", ev.Type, ev.Object)
		}
		added[n.Name] = true
	}
	ev := nextEvent(t, w, settle)
	n, ok := ev.Object.(*metricsv1beta1.NodeMetrics)
	if ev.Type != watch.Modified || !ok || !added[n.Name] {
		t.Fatalf("after the next collection: %s %+v, want MODIFIED of a node", ev.Type, ev.Object)
	}
	w.Stop()

	// A watch on one pod from a list's resourceVersion: the workload changes and the events carry it.
	pod := env.sim.Pods()[0]
	list, err := c.PodMetricses(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list %s/%s: %v (%d items)", pod.Namespace, pod.Name, err, len(list.Items))
	}
	pw, err := c.PodMetricses(pod.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Stop()
	truth := env.sim.Truth().Pods[pod.Namespace+"/"+pod.Name]
	restore := truth[pod.Containers[0]]
	defer func() {
		_ = env.sim.SetPod(pod.Namespace, pod.Name, float64(restore.CPUNanoCores)/1e9, restore.MemoryBytes)
	}()
	if err := env.sim.SetPod(pod.Namespace, pod.Name, 0.321, 77<<20); err != nil {
		t.Fatal(err)
	}
	want := env.sim.Truth().Pods[pod.Namespace+"/"+pod.Name]
	for i := 0; ; i++ {
		ev := nextEvent(t, pw, settle)
		pm, ok := ev.Object.(*metricsv1beta1.PodMetrics)
		if ev.Type != watch.Modified || !ok || pm.Name != pod.Name {
			t.Fatalf("watching one pod: %s %+v, want MODIFIED of %s", ev.Type, ev.Object, pod.Name)
		}
		if pm.ResourceVersion <= list.ResourceVersion {
			t.Errorf("event at resourceVersion %s, not after the list's %s", pm.ResourceVersion, list.ResourceVersion)
		}
		err := checkPod(pm, want)
		if err == nil {
			break
		}
		if i == 10 { // the window holds at most a couple of collections from before the change
			t.Fatalf("after %d MODIFIED events the pod still does not show the change: %v", i+1, err)
		}
	}

	_, err = c.NodeMetricses().Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("a watch from a resourceVersion this server never had: %v, want 410 Gone", err)
	}
}

// TestKubectlGetWatch runs `kubectl get ... -w` as an operator would and reads its rows as collections land.
func TestKubectlGetWatch(t *testing.T) {
	for _, args := range [][]string{
		{"get", "nodes.metrics.k8s.io", "-w", "--output-watch-events"},
		{"get", "podmetrics", "-A", "-w", "--output-watch-events"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, env.cp.Tools.Kubectl, append([]string{"--kubeconfig=" + env.cp.AdminKubeconfig}, args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			// kubectl prints a header, an ADDED row per object, then rows as events arrive; two MODIFIED rows
			// for one object mean it followed at least one collection after the initial list.
			lines := bufio.NewScanner(out)
			var header string
			modified := map[string]int{}
			for lines.Scan() {
				fields := strings.Fields(lines.Text())
				if header == "" {
					header = lines.Text()
					if len(fields) < 4 || fields[0] != "EVENT" || !strings.Contains(header, "CPU") || !strings.Contains(header, "WINDOW") {
						t.Fatalf("header %q", header)
					}
					continue
				}
				if len(fields) > 1 && fields[0] == "MODIFIED" {
					key := strings.Join(fields[1:len(fields)-3], "/")
					if modified[key]++; modified[key] == 2 {
						return
					}
				}
			}
			t.Fatalf("kubectl %s ended without two MODIFIED rows for one object (%v): %v; stderr: %s",
				strings.Join(args, " "), modified, lines.Err(), stderr.String())
		})
	}
}
