package api

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestComponentWatchAndPages watches and pages through the real server with the metrics clientset, in JSON and
// protobuf: a watch from a list's resourceVersion gets the next collection as MODIFIED, and two pages of one list
// come from one collection.
func TestComponentWatchAndPages(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := t0.Add(15 * time.Second)
	for _, protobuf := range []bool{false, true} {
		c := ts.metricsClient(t, protobuf).MetricsV1beta1()
		nodes, err := c.NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil || nodes.ResourceVersion == "" {
			t.Fatalf("protobuf=%v: list nodes: %v, resourceVersion %q", protobuf, err, nodes.ResourceVersion)
		}
		w, err := c.NodeMetricses().Watch(ctx, metav1.ListOptions{ResourceVersion: nodes.ResourceVersion})
		if err != nil {
			t.Fatalf("protobuf=%v: watch nodes: %v", protobuf, err)
		}
		// The next collection: node-a used 0.5 cores over these 15 s.
		prev := next
		next = next.Add(15 * time.Second)
		ts.clock.Set(next.Add(time.Second))
		cum := 1000 + 0.25*15 + 0.5*next.Sub(t0.Add(15*time.Second)).Seconds()
		ts.store.Store(&storage.Batch{Key: "node-a", CPU: storage.CPUCumulative, Nodes: []storage.NodeSample{{Node: "node-a",
			Sample: storage.Sample{Timestamp: next, StartTime: t0.Add(-time.Hour), CPU: cum, Memory: 3 << 30}}}})
		ts.store.EndCycle(true, nil)

		select {
		case ev := <-w.ResultChan():
			n, ok := ev.Object.(*v1beta1.NodeMetrics)
			if ev.Type != watch.Modified || !ok || n.Name != "node-a" || !n.Timestamp.Time.Equal(next) {
				t.Fatalf("protobuf=%v: event %s %+v, want MODIFIED node-a at %v (previous %v)", protobuf, ev.Type, ev.Object, next, prev)
			}
			assertUsage(t, "node-a", n.Usage, 500_000_000, 3<<30)
			if n.ResourceVersion <= nodes.ResourceVersion {
				t.Errorf("protobuf=%v: resourceVersion %s after %s", protobuf, n.ResourceVersion, nodes.ResourceVersion)
			}
		case <-ctx.Done():
			t.Fatalf("protobuf=%v: no event after a collection", protobuf)
		}
		w.Stop()

		first, err := c.PodMetricses("").List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil || podNames(first) != "ns-a/web-1" || first.Continue == "" || first.RemainingItemCount == nil || *first.RemainingItemCount != 1 {
			t.Fatalf("protobuf=%v: first page %s, continue %q, remaining %v: %v", protobuf, podNames(first), first.Continue, first.RemainingItemCount, err)
		}
		second, err := c.PodMetricses("").List(ctx, metav1.ListOptions{Limit: 1, Continue: first.Continue})
		if err != nil || podNames(second) != "ns-b/db-1" || second.Continue != "" || second.ResourceVersion != first.ResourceVersion {
			t.Fatalf("protobuf=%v: second page %s, continue %q, resourceVersion %s (first %s): %v", protobuf,
				podNames(second), second.Continue, second.ResourceVersion, first.ResourceVersion, err)
		}
		if _, err := c.PodMetricses("").List(ctx, metav1.ListOptions{Limit: 1, Continue: "not-a-token"}); !apierrors.IsBadRequest(err) {
			t.Errorf("protobuf=%v: a garbage continue token: %v, want 400", protobuf, err)
		}
	}
}

// TestComponentWatchersDisconnecting fills --max-watches, sees the next watch refused with 429, then has the clients
// go away mid-stream: their slots come back, so clients that disconnect leave nothing behind.
func TestComponentWatchersDisconnecting(t *testing.T) {
	ts := startTestServer(t)
	c := ts.metricsClient(t, false).MetricsV1beta1()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients, disconnect := context.WithCancel(ctx)
	for i := 0; i < maxTestWatches; i++ {
		w, err := c.PodMetricses("").Watch(clients, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		if ev := <-w.ResultChan(); ev.Type != watch.Added {
			t.Fatalf("watch %d: first event %s", i, ev.Type)
		}
	}
	if _, err := c.NodeMetricses().Watch(ctx, metav1.ListOptions{}); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("a watch beyond --max-watches: %v, want 429", err)
	}
	disconnect()
	for i := 0; ; i++ { // the server notices the closed connections and frees the slots
		w, err := c.NodeMetricses().Watch(ctx, metav1.ListOptions{})
		if err == nil {
			w.Stop()
			break
		}
		if !apierrors.IsTooManyRequests(err) || i == 100 {
			t.Fatalf("a watch after the clients went away: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
