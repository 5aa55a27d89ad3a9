package realinstall

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// The burner is the node's known load: a pod burning burnerMillicores and holding burnerMiB, whose cgroup is
// the truth `kubectl top` must show.
const (
	burnerName       = "burner"
	burnerMillicores = 300
	burnerMiB        = 64
	// cpuTolerance is how far a served CPU may be from the cgroup's over the same window; memoryOverheadMiB is
	// what the workload's runtime holds beside its burnerMiB.
	cpuTolerance      = 0.10
	memoryOverheadMiB = 24
)

var burner struct {
	once    sync.Once
	err     error
	sampler *framework.CgroupSampler
}

// startBurner creates the burner (once) and samples its pod's cgroup from then on.
func startBurner(t *testing.T) *framework.CgroupSampler {
	t.Helper()
	burner.once.Do(func() { burner.sampler, burner.err = createBurner(context.Background()) })
	if burner.err != nil {
		t.Fatal(burner.err)
	}
	return burner.sampler
}

func createBurner(ctx context.Context) (*framework.CgroupSampler, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: burnerName, Namespace: "default"},
		// On the first real node, whose cgroups the sampler reads (TestHighAvailability adds a second for a while).
		Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: nodeName}, Containers: []corev1.Container{{
			Name: "burn", Image: framework.WorkloadImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{fmt.Sprintf("-millicores=%d", burnerMillicores), fmt.Sprintf("-memory-mib=%d", burnerMiB)},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: *resource.NewMilliQuantity(burnerMillicores, resource.DecimalSI)}},
		}}},
	}
	p, err := env.cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the burner: %w", err)
	}
	err = framework.Poll(ctx, "the burner running", time.Second, 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err = env.cp.Client.CoreV1().Pods("default").Get(ctx, burnerName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase != corev1.PodRunning {
			return false, fmt.Errorf("phase %s on node %q", p.Status.Phase, p.Spec.NodeName)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	mount, err := framework.CPUAcctMount()
	if err != nil {
		return nil, err
	}
	dir, err := framework.FindDir(filepath.Join(mount, env.node.CgroupRoot), "pod"+string(p.UID))
	if err != nil {
		return nil, err
	}
	return framework.SampleCgroup(dir), nil
}

// topShowsTruth checks that kubectl top (v1) shows the burner's truth: its CPU the rate its cgroup counted over
// the window metrics.k8s.io names (within cpuTolerance), its memory what it holds, and the real node.
func topShowsTruth(t *testing.T) {
	t.Helper()
	sampler := startBurner(t)
	framework.Eventually(t, "kubectl top pod to show the burner's cgroup", 2*time.Minute, func(ctx context.Context) error {
		m, err := env.metrics.MetricsV1().PodMetricses("default").Get(ctx, burnerName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var cpu, mem resource.Quantity
		for _, c := range m.Containers {
			cpu.Add(c.Usage[corev1.ResourceCPU])
			mem.Add(c.Usage[corev1.ResourceMemory])
		}
		lo, hi, err := sampler.RateRange(m.Timestamp.Time, m.Window.Duration)
		if err != nil {
			return err
		}
		got := float64(cpu.MilliValue()) / 1000
		if off := framework.OffRange(got, lo, hi); off > cpuTolerance || off < -cpuTolerance {
			return fmt.Errorf("CPU %.3f cores, the cgroup's %.3f-%.3f over the %s to %s", got, lo, hi, m.Window.Duration, m.Timestamp.Time.Format(time.StampMilli))
		}
		if mib := mem.Value() >> 20; mib < burnerMiB || mib > burnerMiB+memoryOverheadMiB {
			return fmt.Errorf("memory %d MiB, want %d to %d", mib, burnerMiB, burnerMiB+memoryOverheadMiB)
		}
		out, err := env.cp.KubectlOutput(ctx, "", "top", "pod", burnerName, "--no-headers")
		if err != nil {
			return err
		}
		if f := strings.Fields(out); len(f) < 3 || f[1] != framework.KubectlCPU(cpu) || f[2] != framework.KubectlMem(mem) {
			return fmt.Errorf("kubectl top pod printed %q, want %s %s (the same sample through v1)", out, framework.KubectlCPU(cpu), framework.KubectlMem(mem))
		}
		return nil
	})
	framework.Eventually(t, "kubectl top node to show the real node", time.Minute, func(ctx context.Context) error {
		out, err := env.cp.KubectlOutput(ctx, "", "top", "node", nodeName, "--no-headers")
		if err != nil {
			return err
		}
		if f := strings.Fields(out); len(f) < 5 || f[0] != nodeName || f[1] == "<unknown>" || f[3] == "<unknown>" {
			return fmt.Errorf("kubectl top node printed %q", out)
		}
		return nil
	})
}
