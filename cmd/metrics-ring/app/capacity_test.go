package app

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestNodeCapacityBoundsServedValues: the node informer carries status.capacity to storage, which serves nothing
// above it (DESIGN.md section 2, "Plausibility"): node-1 says it has a millicore and a kibibyte, so neither it nor
// its pod is served; once it says 64 cores and 256 GiB, both are.
func TestNodeCapacityBoundsServedValues(t *testing.T) {
	setCapacity := func(ctx context.Context, c *fake.Clientset, cpu, mem string) {
		n, err := c.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(mem)}
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	f := startFixtureWith(t, func(c *fake.Clientset) { setCapacity(ctx, c, "1m", "1Ki") })
	f.waitReady(t)
	served := func() (node, pod bool) {
		_, node = f.w.Storage.Latest().Node("node-1")
		_, pod = f.w.Storage.Latest().Pod("ns", "p1")
		return node, pod
	}
	start, deadline := f.scrapes.Load(), time.Now().Add(10*time.Second) // a bound, not an assertion
	for f.scrapes.Load() < start+3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if node, pod := served(); node || pod {
			t.Fatalf("served above a capacity of 1m and 1Ki: node %v, pod %v", node, pod)
		}
	}
	setCapacity(ctx, f.kube, "64", "256Gi")
	for i := 0; ; i++ { // bounded: a cycle a second
		if node, pod := served(); node && pod {
			break
		}
		if i == 100 {
			t.Fatalf("node-1 or its pod not served under a capacity of 64 cores after %d scrapes", f.scrapes.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
