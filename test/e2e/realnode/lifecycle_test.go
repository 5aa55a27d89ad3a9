package realnode

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// TestInitContainer: while its (non-restartable) init container runs, a pod is Pending, and metrics-ring
// serves it as metrics-server v0.9.0 does, which watches Running pods only: NotFound, never the init
// container's values under the pod (DESIGN.md: pods that are not Running are dropped; completed init
// containers are not served). Once the main container runs the pod is served the main container only, for
// good.
func TestInitContainer(t *testing.T) {
	needNode(t)
	t.Parallel()
	pod := podOn("init", workload("main", "-millicores=50"))
	pod.Spec.InitContainers = []corev1.Container{workload("init", "-millicores=100", "-duration=20s")}
	createPod(t, pod, func(p *corev1.Pod) error {
		for _, s := range p.Status.InitContainerStatuses {
			if s.State.Running != nil {
				return nil
			}
		}
		return fmt.Errorf("init container not running: %+v", p.Status.InitContainerStatuses)
	})
	// Across two of metrics-ring's cycles while the init container runs.
	checked := 0
	for end := time.Now().Add(2*resolution + 2*time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		ctx := context.Background()
		p, err := env.cp.Client.CoreV1().Pods(namespace).Get(ctx, "init", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Status.InitContainerStatuses) != 1 || p.Status.InitContainerStatuses[0].State.Running == nil {
			break
		}
		m, err := podMetrics(ctx, "init")
		if !apierrors.IsNotFound(err) {
			t.Fatalf("pod init is %s with its init container running: metrics-ring answers %v (error %v), want NotFound", p.Status.Phase, m, err)
		}
		if ms, err := msPodMetrics(ctx, "init"); !apierrors.IsNotFound(err) {
			t.Logf("metrics-server answers %v (error %v) meanwhile", ms, err)
		}
		checked++
	}
	if checked < 5 {
		t.Fatalf("only %d checks while the init container ran", checked)
	}
	framework.Eventually(t, "main container served, init gone", 2*time.Minute, func(ctx context.Context) error {
		m, err := podMetrics(ctx, "init")
		if err != nil {
			return err
		}
		if names := containerNames(m); !slices.Equal(names, []string{"main"}) {
			return fmt.Errorf("served containers %v, want [main]", names)
		}
		return nil
	})
	// For three more cycles the finished init container never comes back.
	for end := time.Now().Add(3 * resolution); time.Now().Before(end); time.Sleep(time.Second) {
		m, err := podMetrics(context.Background(), "init")
		if err != nil {
			t.Fatal(err)
		}
		if names := containerNames(m); !slices.Equal(names, []string{"main"}) {
			t.Fatalf("after the init container ended, served containers %v, want [main]", names)
		}
	}
}

// TestSidecar: a restartable init container (a sidecar) is served beside the main container.
func TestSidecar(t *testing.T) {
	needNode(t)
	t.Parallel()
	side := workload("side", "-millicores=50")
	side.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	pod := podOn("sidecar", workload("main", "-millicores=50"))
	pod.Spec.InitContainers = []corev1.Container{side}
	createPod(t, pod, allRunning)
	framework.Eventually(t, "sidecar served beside main", time.Minute, func(ctx context.Context) error {
		m, err := podMetrics(ctx, "sidecar")
		if err != nil {
			return err
		}
		names := containerNames(m)
		slices.Sort(names)
		if !slices.Equal(names, []string{"main", "side"}) {
			return fmt.Errorf("served containers %v, want [main side]", names)
		}
		return nil
	})
}

// TestRestartedContainer: a container the kubelet restarts (its counter starts again from zero, its start
// time changes) is never served a negative rate, nor one above what it can burn, across two restarts; and it
// is served again after them.
func TestRestartedContainer(t *testing.T) {
	needNode(t)
	t.Parallel()
	const burn = 200 // millicores; the container exits with status 1 after 12 s
	createPod(t, podOn("crash", workload("crash", fmt.Sprintf("-millicores=%d", burn), "-duration=12s", "-exit-code=1")), allRunning)
	ceiling := resource.NewMilliQuantity(burn*3/2, resource.DecimalSI)
	var lastRestart time.Time
	restarts := int32(0)
	servedAfter := 0
	framework.EventuallyEvery(t, "two restarts of crash, served after the last", time.Second, 4*time.Minute, func(ctx context.Context) error {
		p, err := env.cp.Client.CoreV1().Pods(namespace).Get(ctx, "crash", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := p.Status.ContainerStatuses; len(s) == 1 && s[0].RestartCount > restarts {
			restarts = s[0].RestartCount
			if s[0].State.Running != nil {
				lastRestart = s[0].State.Running.StartedAt.Time
			}
		}
		m, err := podMetrics(ctx, "crash")
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("not served (restarts %d)", restarts)
		}
		if err != nil {
			return err
		}
		if c, ok := findContainer(m, "crash"); ok {
			cpu := c.Usage.Cpu()
			if cpu.Sign() < 0 || cpu.Cmp(*ceiling) > 0 {
				t.Errorf("at %s (restarts %d): crash served cpu %s, want 0 to %s", m.Timestamp.Format(time.RFC3339), restarts, cpu, ceiling)
			}
			if restarts >= 2 && !lastRestart.IsZero() && m.Timestamp.After(lastRestart) {
				servedAfter++
			}
		}
		if restarts < 2 || servedAfter < 2 {
			return fmt.Errorf("restarts %d, samples served after the last restart %d", restarts, servedAfter)
		}
		return nil
	})
}

// TestDeletedPodGone: once the kubelet has finished a deleted pod (its object is gone), metrics-ring stops
// serving it within a cycle.
func TestDeletedPodGone(t *testing.T) {
	needNode(t)
	t.Parallel()
	createPod(t, podOn("gone", workload("gone", "-millicores=50")), allRunning)
	framework.Eventually(t, "gone served", time.Minute, func(ctx context.Context) error {
		_, err := podMetrics(ctx, "gone")
		return err
	})
	deletePod(t, "gone")
	// Within a cycle: two, for a cycle that had started before the deletion and the informer's delivery.
	framework.EventuallyEvery(t, "gone no longer served", 200*time.Millisecond, 2*resolution, func(ctx context.Context) error {
		m, err := podMetrics(ctx, "gone")
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still served at %s: %v", m.Timestamp, containerNames(m))
	})
}
