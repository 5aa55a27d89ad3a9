package realinstall

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// pagedLists is how many paged lists pagedListAcrossReplicas makes (one pod a page).
const pagedLists = 10

// pagedListAcrossReplicas: the pages of a list of pod metrics reach either replica (the aggregator picks an
// endpoint per request); each page continues after the previous page's last pod on whichever replica it reaches,
// so every pod comes once and no page fails (DESIGN.md section 2; issue 26 finding 5: 410 Gone before).
func pagedListAcrossReplicas(t *testing.T) {
	t.Helper()
	want := servedByBoth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods := env.metrics.MetricsV1().PodMetricses("")
	crossed, pages := 0, 0
	for try := range pagedLists {
		got, n, c, err := framework.PagePods(ctx, pods, 1, 2*len(want)+1)
		if err != nil {
			t.Fatalf("list %d: %v", try, err)
		}
		pages, crossed = pages+n, crossed+c
		if !slices.Equal(got, want) {
			t.Errorf("list %d: the pages gave %v, want every pod once: %v", try, got, want)
		}
	}
	t.Logf("%d paged lists of %d pods: %d pages, %d continued on the other replica", pagedLists, len(want), pages, crossed)
	if crossed == 0 {
		t.Fatal("no page reached the other replica: the aggregator does not balance, the check shows nothing")
	}
	out, err := env.cp.KubectlOutput(ctx, "", "get", "podmetrics.metrics.k8s.io", "-A", "--chunk-size=1",
		"--no-headers", "-o", "custom-columns=NS:.metadata.namespace,NAME:.metadata.name")
	if err != nil {
		t.Fatalf("kubectl get podmetrics --chunk-size=1: %v", err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		got = append(got, strings.Join(strings.Fields(line), "/"))
	}
	if !slices.Equal(got, want) {
		t.Errorf("kubectl get podmetrics --chunk-size=1: %v, want every pod once: %v", got, want)
	}
}

// servedByBoth waits until both replicas (told apart by their resourceVersions) list the same pods, and returns
// them as "namespace/name", in the lists' order.
func servedByBoth(t *testing.T) []string {
	t.Helper()
	var want []string
	framework.Eventually(t, "both replicas to serve the same pods", 2*time.Minute, func(ctx context.Context) error {
		byRun := map[string][]string{}
		for i := 0; i < 30 && len(byRun) < 2; i++ {
			l, err := env.metrics.MetricsV1().PodMetricses("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			byRun[framework.RunOf(l.ResourceVersion)] = podNames(l)
		}
		if len(byRun) < 2 {
			return fmt.Errorf("30 lists all reached one replica (%v)", byRun)
		}
		var lists [][]string
		for _, names := range byRun {
			lists = append(lists, names)
		}
		if !slices.Equal(lists[0], lists[1]) {
			return fmt.Errorf("the replicas serve %v and %v", lists[0], lists[1])
		}
		want = lists[0]
		return nil
	})
	return want
}

func podNames(l *metricsv1.PodMetricsList) []string {
	var names []string
	for _, p := range l.Items {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return names
}

// drainKeepsServing drains node (one replica's) with a kubectl top loop running, and checks what a user would:
// no kubectl top call fails (the other replica serves while the evicted one drains), the replacement waits
// (required anti-affinity, the node cordoned), and meanwhile the PodDisruptionBudget refuses to evict the last
// replica; once the node is uncordoned, two replicas serve again, on both nodes.
func drainKeepsServing(t *testing.T, node string) {
	t.Helper()
	ctx := context.Background()
	pods, err := serverPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var leaving, staying *corev1.Pod
	for i := range pods {
		if pods[i].Spec.NodeName == node {
			leaving = &pods[i]
		} else {
			staying = &pods[i]
		}
	}
	if leaving == nil || staying == nil {
		t.Fatalf("want one replica on %s and one elsewhere: %d pods", node, len(pods))
	}
	stop := make(chan struct{})
	looped := make(chan topLoop, 1)
	go func() { looped <- topLoopUntil(ctx, stop) }()
	defer func() {
		if stop != nil {
			close(stop)
		}
	}()
	start := time.Now()
	if out, err := env.cp.Kubectl(ctx, "", "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=2m"); err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", node, err, out)
	}
	t.Logf("kubectl drain %s: %s evicted and gone in %.1f s", node, leaving.Name, time.Since(start).Seconds())
	err = env.cp.Client.PolicyV1().Evictions(systemNamespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: staying.Name, Namespace: systemNamespace}})
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("evicting the last replica %s: %v, want 429 (the PodDisruptionBudget keeps one available)", staying.Name, err)
	}
	if out, err := env.cp.Kubectl(ctx, "", "uncordon", node); err != nil {
		t.Fatalf("kubectl uncordon %s: %v\n%s", node, err, out)
	}
	waitServing(t, 2)
	t.Logf("two replicas serving again %.1f s after the drain began", time.Since(start).Seconds())
	time.Sleep(5 * time.Second) // the loop also goes on past the new replica's start
	close(stop)
	stop = nil
	loop := <-looped
	t.Logf("kubectl top during the drain: %d calls, %d failed", loop.calls, len(loop.failures))
	if len(loop.failures) > 0 {
		t.Errorf("kubectl top failed during the drain, %d of %d calls; first: %s", len(loop.failures), loop.calls, loop.failures[0])
	}
	if loop.calls < minTopCalls {
		t.Errorf("only %d kubectl top calls ran during the drain (want at least %d)", loop.calls, minTopCalls)
	}
}
