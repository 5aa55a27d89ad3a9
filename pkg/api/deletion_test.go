package api

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// TestDeletedPodNotServedAfterItsDeletion: once the pod informer has told storage that a pod was deleted, no reader
// is served it (DESIGN.md section 2: "dropped when the informer says so, at once"), though no cycle passes (this
// server's loop never runs): not a list, the first page of a paged list, nor a table, whose shared build was made
// before the deletion; not a watch starting then, whose selection's feed made its build before; and a watch open
// since before is sent DELETED once storage publishes the deletion (within MinPublishInterval: its timer is held
// here, and fired by the test).
func TestDeletedPodNotServedAfterItsDeletion(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound, not an assertion
	defer cancel()
	pods := ts.metricsClient(t, false).MetricsV1beta1().PodMetricses("")
	admin := ts.httpClient(t, "alice", []string{"system:masters"})
	const table = "application/json;as=Table;g=meta.k8s.io;v=v1"
	// served says which readers serve ns-a/web-1.
	served := func() []string {
		var out []string
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		page, err := pods.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if hasWeb1(list.Items) {
			out = append(out, "list")
		}
		if hasWeb1(page.Items) {
			out = append(out, "first page")
		}
		if code, body := get(t, admin, ts.url+"/apis/metrics.k8s.io/v1beta1/pods", table); code != 200 {
			t.Fatalf("table: %d %s", code, body)
		} else if strings.Contains(body, `"web-1"`) {
			out = append(out, "table")
		}
		return out
	}

	if got := served(); len(got) != 3 {
		t.Fatalf("before the deletion, web-1 served by %v, want list, first page and table", got)
	}
	open, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Stop()
	for _, want := range []string{"ADDED ns-a/web-1", "ADDED ns-b/db-1"} {
		if got := nextEvent(t, open); got != want {
			t.Fatalf("open watch: %s, want %s", got, want)
		}
	}

	ts.timers.hold()
	gen, removals := ts.store.Latest().Generation(), ts.store.Removals()
	podsAPI := ts.meta.Resource(corev1.SchemeGroupVersion.WithResource("pods"))
	if err := podsAPI.Namespace("ns-a").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ts.store.Removals() == removals; i++ { // the informer's delete event reaches storage
		if i == 1000 {
			t.Fatal("storage was never told of the deletion")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ts.store.Latest().Generation() != gen {
		t.Fatal("storage published the deletion before its timer fired: the test no longer checks the API's part")
	}

	if got := served(); len(got) != 0 {
		t.Errorf("after the deletion, web-1 still served by %v", got)
	}
	started, err := pods.Watch(ctx, metav1.ListOptions{AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer started.Stop()
	if got := nextEvent(t, started); got != "ADDED ns-b/db-1" { // sorted: web-1 would come first
		t.Errorf("a watch started after the deletion began with %s, want ADDED ns-b/db-1", got)
	}

	ts.timers.fire() // storage publishes the deletion
	if got := nextEvent(t, open); got != "DELETED ns-a/web-1" {
		t.Errorf("the watch open since before: %s, want DELETED ns-a/web-1", got)
	}
	if got := nextEvent(t, started); got != "BOOKMARK" {
		t.Errorf("the watch started after the deletion: %s, want BOOKMARK (it was never told of web-1)", got)
	}
}

func hasWeb1(items []metricsv1beta1.PodMetrics) bool {
	for _, p := range items {
		if p.Namespace == "ns-a" && p.Name == "web-1" {
			return true
		}
	}
	return false
}

// nextEvent is the next event of w as "TYPE namespace/name" ("BOOKMARK" for a bookmark), or "none" when none comes
// within 10 s.
func nextEvent(t *testing.T, w watch.Interface) string {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return "closed"
		}
		if ev.Type == watch.Bookmark {
			return "BOOKMARK"
		}
		p, ok := ev.Object.(*metricsv1beta1.PodMetrics)
		if !ok {
			return fmt.Sprintf("%s %T", ev.Type, ev.Object)
		}
		return string(ev.Type) + " " + p.Namespace + "/" + p.Name
	case <-time.After(10 * time.Second): // a bound, not an assertion
		return "none"
	}
}
