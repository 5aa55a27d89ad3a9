package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/ptr"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// TestNodeDeleted deletes a Node: its metrics and its series in metrics-ring's own /metrics go, and come back when
// the node is registered again.
func TestNodeDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes := env.sim.Nodes()
	name := nodes[len(nodes)-1]
	series := fmt.Sprintf(`metrics_ring_kubelet_node_up{node=%q}`, name)
	framework.Eventually(t, "node "+name+" served and in /metrics", settle, func(ctx context.Context) error {
		if _, err := env.metrics.MetricsV1beta1().NodeMetricses().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		return selfMetric(ctx, series, true)
	})

	if err := env.cp.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := env.sim.Register(ctx, env.cp.Client); err != nil {
			t.Errorf("registering the node again: %v", err)
		}
		alloc := nodeAllocatable(t)
		framework.Eventually(t, "every node back in kubectl top", settle, func(ctx context.Context) error {
			return env.cp.TopNodesMatchTruth(ctx, env.sim.Truth().Nodes, alloc)
		})
	})
	framework.Eventually(t, "the deleted node's metrics and series to go", settle, func(ctx context.Context) error {
		_, err := env.metrics.MetricsV1beta1().NodeMetricses().Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get %s: %v, want 404", name, err)
		}
		out, err := env.cp.Kubectl(ctx, "", "top", "nodes", "--no-headers")
		if err != nil {
			return err
		}
		if strings.Contains(out, name+" ") {
			return fmt.Errorf("kubectl top nodes still lists %s:\n%s", name, out)
		}
		return selfMetric(ctx, series, false)
	})
}

// selfMetric checks whether metrics-ring's /metrics has a series starting with prefix.
func selfMetric(ctx context.Context, prefix string, want bool) error {
	code, body, err := env.kubelet.Get(ctx, "/metrics")
	if err != nil || code != 200 {
		return fmt.Errorf("GET /metrics: %d %v", code, err)
	}
	if has := strings.Contains(body, prefix); has != want {
		return fmt.Errorf("/metrics has %s: %v, want %v", prefix, has, want)
	}
	return nil
}

// TestPodRecreatedUnderSameName deletes a pod and creates another with the same name and different usage: the
// first value served for the new pod is the new pod's, never a rate across the old and new containers' counters.
func TestPodRecreatedUnderSameName(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ref := env.sim.Pods()[2]
	pods := env.cp.Client.CoreV1().Pods(ref.Namespace)
	framework.Eventually(t, ref.Name+" served", settle, func(ctx context.Context) error {
		return podMatchesTruth(ctx, ref.Namespace, ref.Name)
	})
	old, err := pods.Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, ref.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	env.sim.RemovePod(ref.Namespace, ref.Name)
	fresh := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: old.Namespace, Labels: old.Labels},
		Spec:       corev1.PodSpec{NodeName: old.Spec.NodeName, Containers: old.Spec.Containers},
	}
	framework.Eventually(t, "the old pod to be gone from the API", settle, func(ctx context.Context) error {
		_, err := pods.Get(ctx, ref.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get: %v", err)
		}
		return nil
	})
	recreated := time.Now()
	created, err := pods.Create(ctx, fresh, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.sim.AddPod(ctx, env.cp.Client, "", created, 0.111, 33<<20); err != nil {
		t.Fatal(err)
	}
	want := env.sim.Truth().Pods[ref.Namespace+"/"+ref.Name]
	framework.EventuallyEvery(t, "the recreated pod to be served", 100*time.Millisecond, settle, func(ctx context.Context) error {
		pm, err := env.metrics.MetricsV1beta1().PodMetricses(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !pm.Timestamp.Time.After(recreated) {
			return fmt.Errorf("still the old pod's sample from %v", pm.Timestamp)
		}
		// The first sample of the new pod: it must already be the new pod's usage.
		if err := checkPod(pm, want); err != nil {
			t.Fatalf("the first value served for the recreated pod mixes in the old one: %v", err)
		}
		return nil
	})
}

// TestSIGTERMDrains sends SIGTERM to a metrics-ring started with --shutdown-delay-duration: /readyz fails at
// once while the metrics API goes on answering, a watch opened before goes on with the collections made
// meanwhile until the server ends it, and the process exits cleanly, no sooner than the delay.
func TestSIGTERMDrains(t *testing.T) {
	const delay = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := env.api.StartBackend(ctx, framework.BackendConfig{
		Service: "metrics-ring-drain", IP: "127.0.0.4", Resolution: resolution,
		Args: append(framework.KubeletSourceArgs(env.simCA), "--shutdown-delay-duration="+delay.String()),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Proc.Stop(10 * time.Second) })
	if err := b.WaitReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	const nodes = "/apis/metrics.k8s.io/v1beta1/nodes"
	framework.Eventually(t, "the drained backend to serve nodes", settle, func(ctx context.Context) error {
		if code, body, err := b.Get(ctx, nodes); err != nil || code != http.StatusOK {
			return fmt.Errorf("GET %s: %d %v %s", nodes, code, err, body)
		}
		return nil
	})

	mc, err := metricsclient.NewForConfig(directConfig(env.cp.Config, b))
	if err != nil {
		t.Fatal(err)
	}
	w, err := mc.MetricsV1beta1().NodeMetricses().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for range env.sim.Nodes() {
		if ev := nextEvent(t, w, settle); ev.Type != watch.Added {
			t.Fatalf("watch nodes: %s first, want ADDED for every node", ev.Type)
		}
	}

	sigterm := time.Now()
	if err := b.Proc.Terminate(); err != nil {
		t.Fatal(err)
	}
	// The signal is handled asynchronously: poll, well within the delay.
	framework.EventuallyEvery(t, "/readyz to fail after SIGTERM", 50*time.Millisecond, delay, func(ctx context.Context) error {
		if code, body, err := b.Get(ctx, "/readyz?verbose"); err != nil || code == http.StatusOK || !strings.Contains(body, "[-]shutdown") {
			return fmt.Errorf("/readyz: %d %v %s", code, err, body)
		}
		return nil
	})
	if code, body, err := b.Get(ctx, nodes); err != nil || code != http.StatusOK {
		t.Fatalf("GET %s during the shutdown delay: %d %v %s", nodes, code, err, body)
	}
	modified := 0
	for ev := range w.ResultChan() { // ends when the server ends it, or with ctx
		if ev.Type == watch.Modified {
			modified++
		}
	}
	if ended := time.Since(sigterm); modified == 0 || ended < delay || ctx.Err() != nil {
		t.Errorf("the watch ended %v after SIGTERM (context: %v) with %d MODIFIED events; want it served through the %v delay, with the collections made meanwhile", ended, ctx.Err(), modified, delay)
	}
	var exitErr error
	err = framework.Poll(ctx, "metrics-ring to exit after SIGTERM", 100*time.Millisecond, time.Minute, func(context.Context) (bool, error) {
		exited, err := b.Proc.Exited()
		exitErr = err
		return exited, nil
	})
	if err != nil {
		t.Fatalf("%v; log tail:\n%s", err, b.Proc.Tail(20))
	}
	if exitErr != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0; log tail:\n%s", exitErr, b.Proc.Tail(20))
	}
	if took := time.Since(sigterm); took < delay {
		t.Errorf("exited %v after SIGTERM, before the %v delay", took, delay)
	}
}
