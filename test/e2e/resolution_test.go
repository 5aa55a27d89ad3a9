package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// TestOneSecondResolution serves kubectl top from a metrics-ring at --metric-resolution=1s and changes a pod's
// workload: the first value served that shows the change must have been sampled within 3 s of the change (the
// served object's own timestamp says when, so a slow test machine cannot fake or spoil the figure), and kubectl top
// must print it.
func TestOneSecondResolution(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const service = "metrics-ring-1s"
	b, err := env.api.StartBackend(ctx, framework.BackendConfig{
		Service: service, IP: "127.0.0.4", Resolution: time.Second,
		Args: append(framework.KubeletSourceArgs(env.simCA), "--kubelet-request-timeout=800ms"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := env.api.PointAPIService(ctx, kubeletService); err != nil {
			t.Error(err)
		}
		b.Proc.Stop(10 * time.Second)
		if err := env.api.WaitAvailable(ctx, env.kubelet, time.Minute); err != nil {
			t.Error(err)
		}
	})
	if err := env.api.PointAPIService(ctx, service); err != nil {
		t.Fatal(err)
	}
	if err := env.api.WaitAvailable(ctx, b, time.Minute); err != nil {
		t.Fatal(err)
	}

	pod := env.sim.Pods()[1]
	c := env.metrics.MetricsV1beta1().PodMetricses(pod.Namespace)
	framework.Eventually(t, "the 1s backend to serve "+pod.Name, settle, func(ctx context.Context) error {
		pm, err := c.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pm.Window.Duration > time.Second+500*time.Millisecond {
			return fmt.Errorf("window %v: not a 1s resolution", pm.Window.Duration)
		}
		return checkPod(pm, env.sim.Truth().Pods[pod.Namespace+"/"+pod.Name])
	})

	before := env.sim.Truth().Pods[pod.Namespace+"/"+pod.Name][pod.Containers[0]]
	t.Cleanup(func() {
		_ = env.sim.SetPod(pod.Namespace, pod.Name, float64(before.CPUNanoCores)/1e9, before.MemoryBytes)
	})
	changed := time.Now()
	if err := env.sim.SetPod(pod.Namespace, pod.Name, 0.654, 99<<20); err != nil {
		t.Fatal(err)
	}
	want := env.sim.Truth().Pods[pod.Namespace+"/"+pod.Name]
	var sampled time.Time
	framework.EventuallyEvery(t, "the change to be served", 100*time.Millisecond, settle, func(ctx context.Context) error {
		pm, err := c.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := checkPod(pm, want); err != nil {
			return err
		}
		sampled = pm.Timestamp.Time
		return nil
	})
	seen := time.Since(changed)
	if lag := sampled.Sub(changed); lag > 3*time.Second {
		t.Errorf("the first value showing the change was sampled %v after it, want within 3s", lag.Round(time.Millisecond))
	} else {
		t.Logf("change sampled after %v, seen by the test after %v", lag.Round(time.Millisecond), seen.Round(time.Millisecond))
	}

	row := wantPodRow(want)
	framework.Eventually(t, "kubectl top pod to print the change", settle, func(ctx context.Context) error {
		out, err := env.cp.Kubectl(ctx, "", "top", "pod", "-n", pod.Namespace, pod.Name, "--no-headers")
		if err != nil {
			return err
		}
		if f := strings.Fields(out); len(f) != 3 || f[1] != row[0] || f[2] != row[1] {
			return fmt.Errorf("kubectl top pod: %q, want %s %v", out, pod.Name, row)
		}
		return nil
	})
}
