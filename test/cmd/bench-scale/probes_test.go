package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// TestProbesReadLists: a server whose GET of a deleted pod says 404 but whose lists still show it (as a list
// answered from a snapshot published before the deletion does) has served it after its deletion, as the HPA
// and kubectl top read it; the probes must say so, and find a new pod by its HPA's selector (listed across
// namespaces, so that namespaced lists in the server's histogram stay the HPA controller's).
func TestProbesReadLists(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		if r.URL.Path != "/apis/metrics.k8s.io/v1beta1/pods" || r.URL.Query().Get("labelSelector") != "workload=w-1" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{
			{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "ns"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "ns"}},
		}})
	}))
	defer srv.Close()
	tr := newTracker(srv.Client(), srv.URL, 15*time.Second, 10)
	t0 := time.Now()
	labels := map[string]string{"app": "app-1", "workload": "w-1"}
	tr.deleted("ns/gone", labels, t0)
	tr.created("ns/new", labels, t0)
	tr.probeOnce(context.Background(), t0.Add(3*time.Second))
	r := tr.result()
	if r.servedAfterDeletion != 1 || r.maxServedAfter != 3*time.Second {
		t.Errorf("deleted pod listed 3 s after its deletion: counted %d, longest %v; want 1, 3s (asked %q)",
			r.servedAfterDeletion, r.maxServedAfter, asked)
	}
	if len(r.toServe) != 1 || len(r.errors) != 0 {
		t.Errorf("new pod in its workload's list: served %v, errors %v; want one", r.toServe, r.errors)
	}
	if len(asked) != 1 {
		t.Errorf("two pods of one workload probed with %d requests (%q), want one list", len(asked), asked)
	}
}

// TestProbeSentBeforeADeletionCountsNothing: a new pod probed by a list that the churner deletes while the list
// is answered was counted as served after its deletion (the hour's 20-minute run: 1, the longest 0.00 s): the
// probe was sent before the deletion. Only a probe sent deletedGrace after it counts.
func TestProbeSentBeforeADeletionCountsNothing(t *testing.T) {
	t0 := time.Now()
	labels := map[string]string{"app": "app-1", "workload": "w-1"}
	var tr *tracker
	deleteOnce := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if deleteOnce { // the churner deletes the pod while its list is answered, after the probe was sent
			deleteOnce = false
			tr.deleted("ns/p", labels, t0.Add(2*time.Second))
		}
		_ = json.NewEncoder(w).Encode(metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{
			{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}},
		}})
	}))
	defer srv.Close()
	tr = newTracker(srv.Client(), srv.URL, 15*time.Second, 10)
	tr.created("ns/p", labels, t0)
	tr.probeOnce(context.Background(), t0.Add(time.Second))
	if r := tr.result(); r.servedAfterDeletion != 0 {
		t.Errorf("a probe sent 1 s before the pod's deletion counted it served after its deletion %d times (longest %v)",
			r.servedAfterDeletion, r.maxServedAfter)
	}
	tr.created("ns/p", labels, t0) // tracked again (result settled it): deleted at 2 s, probed at 4 s, still listed
	tr.deleted("ns/p", labels, t0.Add(2*time.Second))
	tr.probeOnce(context.Background(), t0.Add(4*time.Second))
	if r := tr.result(); r.servedAfterDeletion != 1 || r.maxServedAfter != 2*time.Second {
		t.Errorf("listed 2 s after its deletion: counted %d, longest %v; want 1, 2s", r.servedAfterDeletion, r.maxServedAfter)
	}
}

// TestSoaksNameNewPodsApart: the second server's soak must not name its new pods as the first's did (a Planner
// per soak from one seed did: its creations failed with "already exists").
func TestSoaksNameNewPodsApart(t *testing.T) {
	sim, err := kubeletsim.New(kubeletsim.Config{Nodes: 3, PodsPerNode: 4, Namespaces: 2})
	if err != nil {
		t.Fatal(err)
	}
	e := &benchEnv{sim: sim, client: fake.NewClientset(), planner: sim.NewPlanner(29)}
	for soak := range 2 {
		ch := e.newSoakChurner()
		for range 3 {
			ch.replace(context.Background())
		}
		if r := ch.result(); r.replaced != 3 || len(r.errors) != 0 {
			t.Errorf("soak %d: %d replaced, errors %v; want 3 and none", soak+1, r.replaced, r.errors)
		}
	}
}
