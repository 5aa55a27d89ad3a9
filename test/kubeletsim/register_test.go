package kubeletsim

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeClient is client-go's fake clientset with the one piece of API server behaviour the fake lacks: a
// pods/binding create sets the pod's spec.nodeName.
func fakeClient() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		obj, err := c.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*corev1.Pod).DeepCopy()
		p.Spec.NodeName = b.Target.Name
		return true, nil, c.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, b.Namespace)
	})
	return c
}

func TestRegisterCreatesReadyNodesAndRunningPods(t *testing.T) {
	s := startSim(t, Config{Nodes: 2, PodsPerNode: 2, ContainersPerPod: 2, Namespaces: 2,
		Labels: map[string]string{"team": "metrics"}})
	c := fakeClient()
	ctx := context.Background()
	if err := s.Register(ctx, c); err != nil {
		t.Fatalf("Register: %v", err)
	}
	for _, ns := range s.Namespaces() {
		if _, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s: default service account: %v", ns, err)
		}
	}
	for _, name := range s.Nodes() {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", name, err)
		}
		if got := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port); got != s.Port(name) {
			t.Errorf("node %s publishes port %d, listens on %d", name, got, s.Port(name))
		}
		if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Type != corev1.NodeInternalIP ||
			n.Status.Addresses[0].Address != s.Host() {
			t.Errorf("node %s addresses %+v", name, n.Status.Addresses)
		}
		if len(n.Status.Conditions) == 0 || n.Status.Conditions[0].Type != corev1.NodeReady ||
			n.Status.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("node %s not Ready: %+v", name, n.Status.Conditions)
		}
		if sw := n.Status.NodeInfo.Swap; sw == nil || sw.Capacity == nil || *sw.Capacity != NodeSwapBytes {
			t.Errorf("node %s swap status %+v, want a capacity of %d as a kubelet with swap reports", name, sw, NodeSwapBytes)
		}
	}
	for _, ref := range s.Pods() {
		p, err := c.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s/%s: %v", ref.Namespace, ref.Name, err)
		}
		checkRunning(t, p, ref.Node, len(ref.Containers))
		if p.Labels["team"] != "metrics" || p.Labels["app"] == "" {
			t.Errorf("pod %s labels %v", p.Name, p.Labels)
		}
	}
	// After a restart the sim listens on new ports: registering again succeeds and republishes them.
	n, _ := c.CoreV1().Nodes().Get(ctx, s.Nodes()[0], metav1.GetOptions{})
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 1
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(ctx, c); err != nil {
		t.Fatalf("second Register: %v", err)
	}
	n, _ = c.CoreV1().Nodes().Get(ctx, s.Nodes()[0], metav1.GetOptions{})
	if int(n.Status.DaemonEndpoints.KubeletEndpoint.Port) != s.Port(s.Nodes()[0]) {
		t.Errorf("second Register left the stale port %d", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	}
}

func checkRunning(t *testing.T, p *corev1.Pod, node string, containers int) {
	t.Helper()
	if p.Spec.NodeName != node || p.Status.Phase != corev1.PodRunning {
		t.Errorf("pod %s: node %q phase %q, want %q Running", p.Name, p.Spec.NodeName, p.Status.Phase, node)
	}
	if p.Status.StartTime == nil || time.Since(p.Status.StartTime.Time) < time.Hour {
		t.Errorf("pod %s: start time %v is not well in the past", p.Name, p.Status.StartTime)
	}
	ready := false
	for _, c := range p.Status.Conditions {
		ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
	}
	if !ready || len(p.Status.ContainerStatuses) != containers {
		t.Errorf("pod %s: ready %v, %d container statuses", p.Name, ready, len(p.Status.ContainerStatuses))
	}
}

func TestAddPodBindsServesAndRemovePodStops(t *testing.T) {
	s := startSim(t, Config{Nodes: 2, PodsPerNode: 1})
	c := fakeClient()
	ctx := context.Background()
	node := s.Nodes()[1]
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "default", UID: "1b4e28ba-2fa1-11d2-883f-0016d3cca427"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}, {Name: "log", Image: "busybox"}}}}
	created, err := c.CoreV1().Pods("default").Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddPod(ctx, c, node, created, 0.3, 40<<20); err != nil {
		t.Fatalf("AddPod: %v", err)
	}
	got, _ := c.CoreV1().Pods("default").Get(ctx, "web-abc", metav1.GetOptions{})
	checkRunning(t, got, node, 2)
	truth := s.Truth()
	if u := truth.Pods["default/web-abc"]["log"]; u != (Usage{CPUNanoCores: 300_000_000, MemoryBytes: 40 << 20}) {
		t.Errorf("truth of the adopted pod: %+v", truth.Pods["default/web-abc"])
	}
	a, b := scrapeTwice(t, s, client(t, s), node, "/metrics/resource")
	checkNode(t, s, truth, node, a, b)

	if err := s.AddPod(ctx, c, node, created, 0.3, 1); err == nil {
		t.Error("adopting the same pod twice succeeded")
	}
	if err := s.AddPod(ctx, c, "no-such-node", obj, 0.3, 1); err == nil {
		t.Error("adopting onto an unknown node succeeded")
	}

	s.RemovePod("default", "web-abc")
	s.RemovePod("default", "web-abc") // unknown now: ignored
	if _, ok := s.Truth().Pods["default/web-abc"]; ok {
		t.Error("removed pod still in truth")
	}
	after, _ := scrape(t, s, client(t, s), node, "/metrics/resource")
	if m := series(after["container_cpu_usage_seconds_total"], "pod")["web-abc"]; m != nil {
		t.Error("removed pod still served")
	}
	// The node's counter keeps what the removed pod used: a real node's cgroup counter never goes backwards.
	before := value(b["node_cpu_usage_seconds_total"].GetMetric()[0])
	if now := value(after["node_cpu_usage_seconds_total"].GetMetric()[0]); now < before {
		t.Errorf("node CPU counter went backwards after RemovePod: %v -> %v", before, now)
	}
}
