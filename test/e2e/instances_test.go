package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// simNodeCores is every simulated node's status.capacity.cpu: no value above it may be served.
const simNodeCores = 32

// pollPod reads a pod's metrics every 50 ms for d and checks every answer: a 404 (nothing servable yet), or what
// check accepts. It returns how many answers were served.
func pollPod(t *testing.T, ns, name string, d time.Duration, check func(*corev1.ResourceList, string) error) int {
	t.Helper()
	served := 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pm, err := env.metrics.MetricsV1beta1().PodMetricses(ns).Get(ctx, name, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatalf("get %s/%s: %v", ns, name, err)
		}
		served++
		for _, c := range pm.Containers {
			if cpu := c.Usage.Cpu().AsApproximateFloat64(); cpu > simNodeCores {
				t.Fatalf("%s/%s %s served %.3f cores on a %d-core node (at %v)", ns, name, c.Name, cpu, simNodeCores, pm.Timestamp)
			}
			if err := check(&c.Usage, c.Name); err != nil {
				t.Fatalf("%s/%s at %v: %v", ns, name, pm.Timestamp, err)
			}
		}
	}
	return served
}

// truthOf checks a container's usage against the simulator's truth for the pod.
func truthOf(ns, name string) func(*corev1.ResourceList, string) error {
	return func(u *corev1.ResourceList, container string) error {
		want, ok := env.sim.Truth().Pods[ns+"/"+name][container]
		if !ok {
			return fmt.Errorf("container %s is not the pod's", container)
		}
		return framework.CheckUsage(container, *u, framework.UsageList(want),
			framework.Tolerance{CPUPercent: framework.KubeletCPUPercent})
	}
}

// TestInstancesAndStartTimes: a kubelet that reports a container's old instance (started 2 h ago, its counter 2 h
// of CPU) in turn with a new one, and then a container start time in the year 2611 (past int64 nanoseconds,
// wrapping to just before each sample), never gets an inflated value served (DESIGN.md section 2: any change of a
// start time restarts a series; an invalid start time is unknown): every answer is the truth or nothing, and the
// truth is served. Before, a rate across the two instances' counters, or from the wrapped start, was hundreds of
// cores.
func TestInstancesAndStartTimes(t *testing.T) {
	ref := env.sim.Pods()[7]
	if err := env.sim.SetPod(ref.Namespace, ref.Name, 0.05, 30<<20); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, ref.Name+" served", settle, func(ctx context.Context) error {
		return podMatchesTruth(ctx, ref.Namespace, ref.Name)
	})
	if err := env.sim.AlternateInstances(ref.Namespace, ref.Name, "app", 3); err != nil {
		t.Fatal(err)
	}
	if n := pollPod(t, ref.Namespace, ref.Name, 8*resolution, truthOf(ref.Namespace, ref.Name)); n == 0 {
		t.Errorf("with two instances alternating, the new one's truth was never served")
	}
	if err := env.sim.AlternateInstances(ref.Namespace, ref.Name, "app", 0); err != nil {
		t.Fatal(err)
	}
	if err := env.sim.FarFutureStart(ref.Namespace, ref.Name, "sidecar", true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.sim.FarFutureStart(ref.Namespace, ref.Name, "sidecar", false) })
	if n := pollPod(t, ref.Namespace, ref.Name, 8*resolution, truthOf(ref.Namespace, ref.Name)); n == 0 {
		t.Errorf("with a start time in the year 2611, the truth was never served")
	}
}

// TestPodRecreatedIsNeverServedItsPredecessor force-deletes a pod and re-creates it under its name on the same
// node while the kubelet still reports the old instance (its containers outlive the object, and are reported
// first): every answer for the new pod, polled every 50 ms through the transition, is the new pod's values or
// nothing (DESIGN.md section 2, "Whose samples count"), and once the old instance is gone the new one is served.
func TestPodRecreatedIsNeverServedItsPredecessor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ref := env.sim.Pods()[5]
	pods := env.cp.Client.CoreV1().Pods(ref.Namespace)
	if err := env.sim.SetPod(ref.Namespace, ref.Name, 0.3, 80<<20); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, ref.Name+" served its old values", settle, func(ctx context.Context) error {
		return podMatchesTruth(ctx, ref.Namespace, ref.Name)
	})
	old, err := pods.Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := env.sim.DetachPod(ref.Namespace, ref.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := pods.Delete(ctx, ref.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	// Gone from the API, and from metrics-ring's informer: until its delete event lands there (milliseconds), the
	// old object is still the pod metrics-ring knows by the name, and its values are rightly that object's.
	framework.Eventually(t, "the old pod to be gone from the API and the metrics API", settle, func(ctx context.Context) error {
		if _, err := pods.Get(ctx, ref.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("get: %v", err)
		}
		_, err := env.metrics.MetricsV1beta1().PodMetricses(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod metrics: %v, want 404", err)
		}
		return nil
	})
	fresh := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: old.Namespace, Labels: old.Labels},
		Spec:       corev1.PodSpec{NodeName: old.Spec.NodeName, Containers: old.Spec.Containers},
	}
	created, err := pods.Create(ctx, fresh, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.sim.AddPodStarted(ctx, env.cp.Client, "", created, 0.04, 20<<20, time.Now()); err != nil {
		t.Fatal(err)
	}
	newValues := func(u *corev1.ResourceList, container string) error {
		if m := u.Memory().Value(); m != 20<<20 {
			return fmt.Errorf("container %s served %d bytes, its predecessor's %d? want the new pod's %d", container, m, 80<<20, 20<<20)
		}
		return truthOf(ref.Namespace, ref.Name)(u, container)
	}
	pollPod(t, ref.Namespace, ref.Name, 4*resolution, newValues) // the old instance is still reported
	stop()
	if n := pollPod(t, ref.Namespace, ref.Name, 6*resolution, newValues); n == 0 {
		t.Errorf("the re-created pod was never served once its predecessor was gone")
	}
}
