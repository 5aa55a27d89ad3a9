package replicas

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// allPods are the simulator's pods as "namespace/name", sorted as lists are.
func allPods() []string {
	var out []string
	for _, p := range env.sim.Pods() {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

// direct lists every pod from replica r itself, not through the aggregator.
func direct(ctx context.Context, r *framework.Backend) (*metricsv1.PodMetricsList, error) {
	code, body, err := r.Get(ctx, "/apis/metrics.k8s.io/v1/pods")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d: %s", r.Replica, code, body)
	}
	var l metricsv1.PodMetricsList
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		return nil, fmt.Errorf("%s: decoding: %w", r.Replica, err)
	}
	return &l, nil
}

// settled waits until both replicas serve every pod, each on its own.
func settled(t *testing.T) []string {
	want := allPods()
	framework.Eventually(t, "both replicas serve every pod", 2*time.Minute, func(ctx context.Context) error {
		for _, r := range env.replicas {
			l, err := direct(ctx, r)
			if err != nil {
				return err
			}
			if len(l.Items) != len(want) {
				return fmt.Errorf("%s serves %d of %d pods", r.Replica, len(l.Items), len(want))
			}
		}
		return nil
	})
	return want
}

// TestPagedListAcrossReplicas: the pages of one list reach either replica (the aggregator picks one per request);
// each page continues after the previous page's last pod, so every pod comes once and no page fails. Before, a
// page that reached the other replica was 410 Gone and the list failed.
func TestPagedListAcrossReplicas(t *testing.T) {
	want := settled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := env.metrics.MetricsV1().PodMetricses("")
	crossed := 0
	for try := range 20 {
		got, _, c, err := framework.PagePods(ctx, pods, 3, 2*len(want)+1)
		if err != nil {
			t.Fatalf("try %d: %v", try, err)
		}
		crossed += c
		if !slices.Equal(got, want) {
			t.Errorf("try %d: the pages gave %d pods %v, want every pod once (%d)", try, len(got), got, len(want))
		}
	}
	if crossed == 0 {
		t.Fatal("no page reached the other replica in 20 lists: the aggregator does not balance, the test shows nothing")
	}
	t.Logf("%d pages continued on the other replica", crossed)

	// kubectl pages the same way (--chunk-size, 500 by default).
	for try := range 5 {
		out, err := env.cp.KubectlOutput(ctx, "", "get", "podmetrics.metrics.k8s.io", "-A", "--chunk-size=3",
			"--no-headers", "-o", "custom-columns=NS:.metadata.namespace,NAME:.metadata.name")
		if err != nil {
			t.Fatalf("kubectl, try %d: %v", try, err)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			got = append(got, strings.Join(strings.Fields(line), "/"))
		}
		if !slices.Equal(got, want) {
			t.Errorf("kubectl, try %d: %d pods %v, want every pod once (%d)", try, len(got), got, len(want))
		}
	}
}

// TestWatchResumedOnAnotherReplica: a watch resumed through the aggregator from replica A's resourceVersion either
// reaches A, which resumes it, or B, which answers 410 Gone (never reading A's number as one of its own).
func TestWatchResumedOnAnotherReplica(t *testing.T) {
	settled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := env.replicas[0]
	pods := env.metrics.MetricsV1().PodMetricses("")
	gone, resumed := 0, 0
	for try := 0; try < 40 && (gone < 2 || resumed < 2); try++ {
		l, err := direct(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			if !strings.Contains(err.Error(), "not one of this server's") {
				t.Errorf("try %d: 410 Gone for replica A's fresh %s, but not as another replica's: %v", try, l.ResourceVersion, err)
			}
			gone++
			continue
		}
		if err != nil {
			t.Fatalf("try %d: watch from %s: %v", try, l.ResourceVersion, err)
		}
		select {
		case ev := <-w.ResultChan():
			obj, ok := ev.Object.(metav1.Object)
			if !ok || ev.Type == watch.Error || framework.RunOf(obj.GetResourceVersion()) != framework.RunOf(l.ResourceVersion) {
				t.Errorf("try %d: resumed from replica A's %s, got %s %+v", try, l.ResourceVersion, ev.Type, ev.Object)
			}
		case <-time.After(10 * resolution):
			t.Errorf("try %d: no event within %v of resuming from %s", try, 10*resolution, l.ResourceVersion)
		}
		w.Stop()
		resumed++
	}
	if gone == 0 || resumed == 0 {
		t.Fatalf("%d watches resumed, %d were 410 Gone: want both (each replica reached)", resumed, gone)
	}
}

// TestInformerAcrossReplicas: an informer of pod metrics whose watches reconnect every 2 s, each to either replica:
// when one reaches the replica that did not make its resourceVersion it gets 410 Gone and lists again, and its
// store then holds every pod, once.
func TestInformerAcrossReplicas(t *testing.T) {
	want := settled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := env.metrics.MetricsV1().PodMetricses("")
	var mu sync.Mutex
	starts, gone := 0, 0 // lists (or watches from nothing), and 410s
	var other []error
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			starts++
			mu.Unlock()
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.ResourceVersion == "" || o.SendInitialEvents != nil {
				mu.Lock()
				starts++
				mu.Unlock()
			}
			timeout := int64(2)
			o.TimeoutSeconds = &timeout // reconnect often, to either replica
			return pods.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &metricsv1.PodMetrics{}, 0, cache.Indexers{})
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		mu.Lock()
		defer mu.Unlock()
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			gone++
		} else {
			other = append(other, err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	go inf.RunWithContext(ctx)
	framework.Eventually(t, "the informer lists again after a 410 Gone", 2*time.Minute, func(context.Context) error {
		keys := inf.GetStore().ListKeys()
		slices.Sort(keys)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !slices.Equal(keys, want):
			return fmt.Errorf("the store has %d of %d pods", len(keys), len(want))
		case gone < 2 || starts < 3:
			return fmt.Errorf("%d watches 410 Gone, %d lists", gone, starts)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(other) > 0 {
		t.Errorf("watch errors other than 410 Gone: %v", other)
	}
}
