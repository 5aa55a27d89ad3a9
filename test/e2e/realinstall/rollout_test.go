package realinstall

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// Bounds of the kubectl top loop run across a rollout: at most topCalls calls, one every topEvery.
const (
	topCalls = 400
	topEvery = 250 * time.Millisecond
	// minTopCalls is how many calls make the check mean something: a rollout here takes tens of seconds.
	minTopCalls = 10
)

// rolloutKeepsServing runs `kubectl rollout restart` on the server's Deployment with a `kubectl top` loop and a
// watch running, and checks what a user would see: no kubectl top call fails (the new pod is Ready before the
// old one stops, and the old one keeps serving through its shutdown delay while its endpoint drains), and the
// watch, which lived on the old pod, ends; resuming it from the old pod's resourceVersion is 410 Gone, and a
// relist and a watch from the list's version work (DESIGN.md section 2: a version from another replica or an
// earlier run is never read as one of ours).
func rolloutKeepsServing(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	before, err := serverPods(ctx)
	if err != nil || len(before) != 1 {
		t.Fatalf("want one pod before the rollout: %d, %v", len(before), err)
	}
	w, err := env.metrics.MetricsV1().PodMetricses("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watching v1 PodMetrics: %v", err)
	}
	defer w.Stop()
	watched := make(chan watchEnd, 1)
	go func() { watched <- follow(w) }()

	stop := make(chan struct{})
	looped := make(chan topLoop, 1)
	go func() { looped <- topLoopUntil(ctx, stop) }()
	if out, err := env.cp.Kubectl(ctx, "", "-n", systemNamespace, "rollout", "restart", "deployment/"+serverName); err != nil {
		close(stop)
		t.Fatalf("rollout restart: %v\n%s", err, out)
	}
	start := time.Now()
	rolledOut(t)
	framework.Eventually(t, "the old pod "+before[0].Name+" gone", 2*time.Minute, func(ctx context.Context) error {
		pods, err := serverPods(ctx)
		for _, p := range pods {
			if p.Name == before[0].Name {
				return fmt.Errorf("still there (deleting: %v)", p.DeletionTimestamp != nil)
			}
		}
		return err
	})
	t.Logf("rollout: the old pod gone %.1f s after the restart", time.Since(start).Seconds())
	time.Sleep(5 * time.Second) // the loop also goes on past the old pod's end
	close(stop)
	loop := <-looped
	t.Logf("kubectl top during the rollout: %d calls, %d failed", loop.calls, len(loop.failures))
	if len(loop.failures) > 0 {
		t.Errorf("kubectl top failed during the rollout, %d of %d calls; first: %s", len(loop.failures), loop.calls, loop.failures[0])
	}
	if loop.calls < minTopCalls {
		t.Errorf("only %d kubectl top calls ran during the rollout (want at least %d)", loop.calls, minTopCalls)
	}

	var end watchEnd
	select {
	case end = <-watched:
	case <-time.After(time.Minute):
		t.Fatal("the watch opened on the old pod did not end within a minute after it was gone")
	}
	if end.lastVersion == "" {
		t.Fatal("the watch across the rollout delivered no event before it ended")
	}
	t.Logf("the watch ended after %d events (error event: %q); its last resourceVersion %s", end.events, end.status, end.lastVersion)
	resumeIsGone(t, end.lastVersion)
	relistAndWatch(t)
}

type watchEnd struct {
	events      int
	lastVersion string
	// status is the error event that ended the watch, if one did (a server may end a watch so).
	status string
}

// follow reads w until it ends, keeping the last resourceVersion.
func follow(w watch.Interface) watchEnd {
	var end watchEnd
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			end.status = apierrors.FromObject(ev.Object).Error()
			return end
		}
		if o, err := metaOf(ev.Object); err == nil {
			end.events++
			end.lastVersion = o.GetResourceVersion()
		}
	}
	return end
}

func metaOf(o any) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", o)
	}
	return m, nil
}

// resumeIsGone watches again from the old pod's last resourceVersion: the new pod answers 410 Gone, when the
// watch starts or as its first event.
func resumeIsGone(t *testing.T, version string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := env.metrics.MetricsV1().PodMetricses("").Watch(ctx, metav1.ListOptions{ResourceVersion: version})
	if err != nil {
		if !apierrors.IsGone(err) && !apierrors.IsResourceExpired(err) {
			t.Fatalf("resuming the watch from the old pod's %s: %v, want 410 Gone", version, err)
		}
		return
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		var status *metav1.Status
		if ok && ev.Type == watch.Error {
			status, _ = ev.Object.(*metav1.Status)
		}
		if status == nil || status.Code != http.StatusGone {
			t.Fatalf("resuming the watch from the old pod's %s: first event %v %+v, want an error event 410 Gone", version, ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatalf("resuming the watch from the old pod's %s: nothing within a minute, want 410 Gone", version)
	}
}

// relistAndWatch is what a client does after 410: list, then watch from the list's version; the watch
// delivers the next samples.
func relistAndWatch(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := env.metrics.MetricsV1().PodMetricses("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("relisting: %v", err)
	}
	w, err := env.metrics.MetricsV1().PodMetricses("").Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatalf("watching from the relist's %s: %v", l.ResourceVersion, err)
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok || ev.Type == watch.Error {
			t.Fatalf("watching from the relist's %s: %v %+v", l.ResourceVersion, ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatalf("watching from the relist's %s: no event within two minutes", l.ResourceVersion)
	}
}

type topLoop struct {
	calls    int
	failures []string
}

// topLoopUntil runs kubectl top pods -A every topEvery until stop is closed (topCalls at most).
func topLoopUntil(ctx context.Context, stop <-chan struct{}) topLoop {
	var loop topLoop
	tick := time.NewTicker(topEvery)
	defer tick.Stop()
	for loop.calls < topCalls {
		select {
		case <-stop:
			return loop
		case <-tick.C:
		}
		out, err := env.cp.Kubectl(ctx, "", "top", "pods", "-A", "--no-headers")
		loop.calls++
		if err == nil && !strings.Contains(out, burnerName) {
			err = errors.New("no burner row")
		}
		if err != nil {
			loop.failures = append(loop.failures, fmt.Sprintf("%s: %v: %s", time.Now().Format(time.StampMilli), err, out))
		}
	}
	return loop
}
