package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// TestRecreatedPod: a pod force-deleted and re-created at once under its name (what a test suite or a
// StatefulSet does), on the same node, while the kubelet still runs the old pod's container. The old pod burns
// 400m and holds 96 MiB, the new one 50m and 16 MiB: metrics-ring never serves the name a sample from before
// the new container started, nor memory or CPU only the old container could have (the old series), nor a
// spike; and it serves the new pod's own values within a minute. metrics-server's answers in the same run are
// logged beside (not asserted: it is the reference, not the code under test).
func TestRecreatedPod(t *testing.T) {
	needNode(t)
	t.Parallel()
	const name = "again"
	pods := env.cp.Client.CoreV1().Pods(namespace)
	createPod(t, podOn(name, workload("c", "-millicores=400", "-memory-mib=96")), allRunning)
	framework.Eventually(t, "old pod served its values", 2*time.Minute, func(ctx context.Context) error {
		m, err := podMetrics(ctx, name)
		if err != nil {
			return err
		}
		// Its CPU is what it gets of the busy cores (0.2 of its 0.4 once): the memory tells it apart.
		if c, ok := findContainer(m, "c"); !ok || c.Usage.Memory().Value() < 96<<20 || cores(c.Usage.Cpu()) < 0.1 {
			return fmt.Errorf("served %v", m.Containers)
		}
		return nil
	})
	if err := pods.Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatalf("force-deleting %s: %v", name, err)
	}
	recreated := time.Now()
	newPod := podOn(name, workload("c", "-millicores=50", "-memory-mib=16"))
	if _, err := pods.Create(context.Background(), newPod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("re-creating %s: %v", name, err)
	}

	// The new container's values: 50m (a spike is above 4 times that) and 16 MiB plus the runtime's (the old
	// container's 96 MiB is far above 64 MiB).
	const cpuCeiling, memCeiling = 0.2, 64 << 20
	var started time.Time
	seen := map[string]map[time.Time]bool{"metrics-ring": {}, "metrics-server": {}}
	newSamples := 0
	framework.EventuallyEvery(t, "the re-created pod served its own values", 250*time.Millisecond, 3*time.Minute, func(ctx context.Context) error {
		if started.IsZero() {
			started = runningSince(ctx, name)
		}
		logKubelet(ctx, t, name)
		if ms, err := msPodMetrics(ctx, name); err == nil {
			r := toReadingBeta(ms)
			if !seen["metrics-server"][r.ts] {
				seen["metrics-server"][r.ts] = true
				t.Logf("metrics-server %s: sample %s (%+.1fs after the new container started), cpu %.4f, memory %d",
					name, r.ts.Format("15:04:05.000"), r.ts.Sub(started).Seconds(), r.cpu["c"], r.mem["c"])
			}
		}
		m, err := podMetrics(ctx, name)
		if err != nil {
			return fmt.Errorf("metrics-ring: %w", err)
		}
		r := toReading(m.Timestamp.Time, m.Window.Duration, m.Containers)
		if !seen["metrics-ring"][r.ts] {
			seen["metrics-ring"][r.ts] = true
			t.Logf("metrics-ring   %s: sample %s (%+.1fs after the new container started), window %s, cpu %.4f, memory %d",
				name, r.ts.Format("15:04:05.000"), r.ts.Sub(started).Seconds(), r.window, r.cpu["c"], r.mem["c"])
			switch {
			case started.IsZero():
				t.Errorf("sample %s served before the new pod's container runs (re-created at %s)", r.ts.Format(time.StampMilli), recreated.Format(time.StampMilli))
			case r.ts.Before(started.Add(-time.Second)):
				t.Errorf("sample %s served for the new pod, older than its container (started %s): the old pod's", r.ts.Format(time.StampMilli), started.Format(time.StampMilli))
			case r.mem["c"] >= memCeiling || r.cpu["c"] > cpuCeiling:
				t.Errorf("sample %s: served cpu %.4f memory %d for the new pod (50m, 16 MiB): the old pod's or a spike", r.ts.Format(time.StampMilli), r.cpu["c"], r.mem["c"])
			default:
				newSamples++
			}
		}
		// 20 s: the kubelet has long stopped reporting the old container (in three runs it did within 2 s of the
		// force-delete, once with a last all-zero sample, and never beside the new one).
		if newSamples < 3 || time.Since(recreated) < 20*time.Second {
			return fmt.Errorf("%d samples of the new pod served, %s since re-creation", newSamples, time.Since(recreated).Round(time.Second))
		}
		return nil
	})
}

// runningSince is when the pod's container c started running, zero if it does not run (yet).
func runningSince(ctx context.Context, name string) time.Time {
	p, err := env.cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		return time.Time{}
	}
	return p.Status.ContainerStatuses[0].State.Running.StartedAt.Time
}

// logKubelet logs the kubelet's CPU, memory and start time lines of the pod when the containers it reports
// change (how many, which start times): whether the old and the new container are reported side by side under
// one name, and with which values.
func logKubelet(ctx context.Context, t *testing.T, pod string) {
	lines, err := env.kubelet.podLines(ctx, pod)
	if err != nil {
		t.Logf("kubelet: %v", err)
		return
	}
	var shown, starts []string
	for _, l := range lines {
		if strings.HasPrefix(l, "container_cpu_usage") || strings.HasPrefix(l, "container_memory_working_set") || strings.HasPrefix(l, "container_start_time") {
			shown = append(shown, l)
		}
		if strings.HasPrefix(l, "container_start_time") {
			starts = append(starts, l)
		}
	}
	if key := fmt.Sprint(len(shown), starts); key != lastKubelet {
		lastKubelet = key
		t.Logf("kubelet /metrics/resource for %s at %s:\n%s", pod, time.Now().Format("15:04:05.000"), strings.Join(shown, "\n"))
	}
}

var lastKubelet string
