package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"
	"k8s.io/utils/ptr"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// podStartTimeout bounds a pod's start on the real node (sandbox, CNI, two containers) on a loaded machine.
const podStartTimeout = 2 * time.Minute

// workload is a container of the workload image with its flags, e.g. workload("burn", "-millicores=200").
func workload(name string, args ...string) corev1.Container {
	return corev1.Container{
		Name: name, Image: framework.WorkloadImage, ImagePullPolicy: corev1.PullNever, Args: args,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
		}},
	}
}

// podOn is a pod bound to the real node (no scheduler runs here).
func podOn(name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName: nodeName, Containers: containers,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
		},
	}
}

// createPod creates pod, deletes it when the test ends, and waits until running says it has started.
func createPod(t *testing.T, pod *corev1.Pod, running func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pods := env.cp.Client.CoreV1().Pods(namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	t.Cleanup(func() { deletePod(t, pod.Name) })
	var got *corev1.Pod
	framework.Eventually(t, "pod "+pod.Name+" started on "+nodeName, podStartTimeout, func(ctx context.Context) error {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got = p
		return running(p)
	})
	return got
}

// allRunning holds when every container of the pod (not its init containers) runs.
func allRunning(p *corev1.Pod) error {
	if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return fmt.Errorf("phase %s, %d of %d containers have a status", p.Status.Phase, len(p.Status.ContainerStatuses), len(p.Spec.Containers))
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return fmt.Errorf("container %s is not running: %+v", c.Name, c.State)
		}
	}
	return nil
}

// deletePod deletes the pod and waits until the kubelet has finished it (the object is gone).
func deletePod(t *testing.T, name string) {
	t.Helper()
	pods := env.cp.Client.CoreV1().Pods(namespace)
	err := pods.Delete(context.Background(), name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Errorf("deleting pod %s: %v", name, err)
		return
	}
	framework.Eventually(t, "pod "+name+" gone", podStartTimeout, func(ctx context.Context) error {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// containerID is the runtime's ID of the pod's container (init containers included).
func containerID(p *corev1.Pod, name string) (string, error) {
	for _, c := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if c.Name == name && c.ContainerID != "" {
			_, id, _ := strings.Cut(c.ContainerID, "://")
			return id, nil
		}
	}
	return "", fmt.Errorf("pod %s has no container %s with an ID", p.Name, name)
}

// podMetrics reads the pod's metrics through the aggregator (v1).
func podMetrics(ctx context.Context, name string) (*metricsv1.PodMetrics, error) {
	return env.metrics.MetricsV1().PodMetricses(namespace).Get(ctx, name, metav1.GetOptions{})
}

// containerNames lists the containers a PodMetrics holds.
func containerNames(m *metricsv1.PodMetrics) []string {
	var names []string
	for _, c := range m.Containers {
		names = append(names, c.Name)
	}
	return names
}

func findContainer(m *metricsv1.PodMetrics, name string) (metricsv1.ContainerMetrics, bool) {
	for _, c := range m.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return metricsv1.ContainerMetrics{}, false
}
