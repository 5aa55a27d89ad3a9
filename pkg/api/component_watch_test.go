package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestComponentWatchAndPages watches and pages through the real server with the metrics clientset of every
// served version, in JSON and protobuf: a watch from a list's resourceVersion gets the next collection as MODIFIED,
// and two pages of one list come from one collection.
func TestComponentWatchAndPages(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := t0.Add(15 * time.Second)
	for _, protobuf := range []bool{false, true} {
		for _, c := range ts.versionClients(t, protobuf)[1:] {
			at := fmt.Sprintf("%s protobuf=%v", c.version, protobuf)
			nodes, err := c.nodes(ctx, metav1.ListOptions{})
			if err != nil || nodes.ResourceVersion == "" {
				t.Fatalf("%s: list nodes: %v, resourceVersion %q", at, err, nodes.ResourceVersion)
			}
			w, err := c.watchNodes(ctx, metav1.ListOptions{ResourceVersion: nodes.ResourceVersion})
			if err != nil {
				t.Fatalf("%s: watch nodes: %v", at, err)
			}
			// The next collection: node-a used 0.5 cores over these 15 s; the pods go on as feed has them, so they
			// stay fresh through every client's turn.
			prev := next
			next = next.Add(15 * time.Second)
			ts.clock.Set(next.Add(time.Second))
			cum, f := 1000+0.25*15+0.5*next.Sub(t0.Add(15*time.Second)).Seconds(), next.Sub(t0).Seconds()
			start := t0.Add(-time.Hour)
			cy := ts.store.BeginCycle()
			cy.Append(&storage.Batch{Key: "node-a", CPU: storage.CPUCumulative, Nodes: []storage.NodeSample{{Node: "node-a",
				Sample: storage.Sample{Timestamp: next, StartTime: start, CPU: cum, Memory: 3 << 30}}},
				Containers: []storage.ContainerSample{
					{Namespace: "ns-a", Pod: "web-1", Container: "app", Sample: storage.Sample{Timestamp: next, StartTime: start, CPU: 10 + 0.1*f, Memory: 20 << 20}},
					{Namespace: "ns-a", Pod: "web-1", Container: "sidecar", Sample: storage.Sample{Timestamp: next, StartTime: start, CPU: 5 + 0.05*f, Memory: 5 << 20}},
					{Namespace: "ns-b", Pod: "db-1", Container: "app", Sample: storage.Sample{Timestamp: next, StartTime: start, CPU: 50 + 1.5*f, Memory: 1 << 30}},
				}})
			cy.Commit(storage.Outcome{Success: true})

			select {
			case ev := <-w.ResultChan():
				n, ok := ev.Object.(*metrics.NodeMetrics)
				if ev.Type != watch.Modified || !ok || n.Name != "node-a" || !n.Timestamp.Time.Equal(next) {
					t.Fatalf("%s: event %s %+v, want MODIFIED node-a at %v (previous %v)", at, ev.Type, ev.Object, next, prev)
				}
				assertUsage(t, "node-a", n.Usage, 500_000_000, 3<<30)
				if n.ResourceVersion <= nodes.ResourceVersion {
					t.Errorf("%s: resourceVersion %s after %s", at, n.ResourceVersion, nodes.ResourceVersion)
				}
			case <-ctx.Done():
				t.Fatalf("%s: no event after a collection", at)
			}
			w.Stop()

			first, err := c.pods(ctx, "", metav1.ListOptions{Limit: 1})
			if err != nil || podNames(first) != "ns-a/web-1" || first.Continue == "" || first.RemainingItemCount == nil || *first.RemainingItemCount != 1 {
				t.Fatalf("%s: first page %s, continue %q, remaining %v: %v", at, podNames(first), first.Continue, first.RemainingItemCount, err)
			}
			second, err := c.pods(ctx, "", metav1.ListOptions{Limit: 1, Continue: first.Continue})
			if err != nil || podNames(second) != "ns-b/db-1" || second.Continue != "" || second.ResourceVersion != first.ResourceVersion {
				t.Fatalf("%s: second page %s, continue %q, resourceVersion %s (first %s): %v", at,
					podNames(second), second.Continue, second.ResourceVersion, first.ResourceVersion, err)
			}
			if _, err := c.pods(ctx, "", metav1.ListOptions{Limit: 1, Continue: "not-a-token"}); !apierrors.IsBadRequest(err) {
				t.Errorf("%s: a garbage continue token: %v, want 400", at, err)
			}
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

// TestComponentWatchVersionsShareEvents: a v1 and a v1beta1 watch of one selection share their feed and its events,
// and each client gets the events in its own version.
func TestComponentWatchVersionsShareEvents(t *testing.T) {
	ts := startTestServer(t)
	admin := ts.httpClient(t, "alice", []string{"system:masters"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, list := get(t, admin, ts.url+"/apis/metrics.k8s.io/v1/nodes", "")
	var l metav1.List
	if err := json.Unmarshal([]byte(list), &l); err != nil || l.ResourceVersion == "" {
		t.Fatalf("list nodes: %v: %s", err, trim(list))
	}
	streams := map[string]*bufio.Reader{}
	for _, v := range servedVersions {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			ts.url+"/apis/metrics.k8s.io/"+v+"/nodes?watch=1&resourceVersion="+l.ResourceVersion, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := admin.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s watch: %v %v", v, err, resp)
		}
		defer resp.Body.Close()
		streams[v] = bufio.NewReader(resp.Body)
	}
	// The self-metrics say which version each watch uses.
	if _, body := get(t, admin, ts.url+"/metrics", ""); !strings.Contains(body, `metrics_ring_api_watches{version="v1"} 1`) ||
		!strings.Contains(body, `metrics_ring_api_watches{version="v1beta1"} 1`) {
		t.Errorf("/metrics does not count one watch of each version:\n%s", grepLines(body, "metrics_ring_api_watches"))
	}
	next := t0.Add(30 * time.Second)
	ts.clock.Set(next.Add(time.Second))
	cy := ts.store.BeginCycle()
	cy.Append(&storage.Batch{Key: "node-a", CPU: storage.CPUCumulative, Nodes: []storage.NodeSample{{Node: "node-a",
		Sample: storage.Sample{Timestamp: next, StartTime: t0.Add(-time.Hour), CPU: 1000 + 0.25*30, Memory: 3 << 30}}}})
	cy.Commit(storage.Outcome{Success: true})
	for v, r := range streams {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s watch: %v", v, err)
		}
		var ev struct {
			Type   string
			Object metav1.TypeMeta
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Type != "MODIFIED" ||
			ev.Object.APIVersion != "metrics.k8s.io/"+v || ev.Object.Kind != "NodeMetrics" {
			t.Errorf("%s watch: %v: want MODIFIED NodeMetrics of metrics.k8s.io/%s, got %s", v, err, v, line)
		}
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
