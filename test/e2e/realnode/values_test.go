package realnode

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// cpuTolerance is how far metrics-ring's CPU may be from the cgroup's own counter over the same window.
const cpuTolerance = 0.05

// TestCPUAndMemoryAgainstCgroup: a container burning CPU and holding memory on the real node is served, over
// several windows, a CPU rate within 5 % of its cgroup's cpuacct.usage over the same window (the window's ends
// are the kubelet's sample times; the served end is known to the second, see framework.CgroupSampler.RateRange), and the memory the
// kubelet reports as working set exactly.
func TestCPUAndMemoryAgainstCgroup(t *testing.T) {
	needNode(t)
	p := createPod(t, podOn("burn", workload("burn", "-millicores=250", "-memory-mib=48")), allRunning)
	id, err := containerID(p, "burn")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := containerCgroup(id)
	if err != nil {
		t.Fatal(err)
	}
	sampler := framework.SampleCgroup(dir)
	defer sampler.Stop()

	const windows = 3
	seen := map[time.Time]bool{}
	memChecked := 0
	framework.Eventually(t, fmt.Sprintf("%d windows of burn checked against %s", windows, dir), 3*time.Minute, func(ctx context.Context) error {
		m, err := podMetrics(ctx, "burn")
		if err != nil {
			return err
		}
		c, ok := findContainer(m, "burn")
		if !ok {
			return fmt.Errorf("container burn not served: %v", containerNames(m))
		}
		end := m.Timestamp.Time
		if !seen[end] {
			lo, hi, err := sampler.RateRange(end, m.Window.Duration)
			if err != nil {
				return err
			}
			got := float64(c.Usage.Cpu().ScaledValue(resource.Nano)) / 1e9
			off := framework.OffRange(got, lo, hi)
			t.Logf("window of %s ending %s+<1s: metrics-ring %.4f cores, cgroup cpuacct.usage %.4f to %.4f cores (%+.2f%% off), memory %d bytes",
				m.Window.Duration, end.Format("15:04:05"), got, lo, hi, 100*off, c.Usage.Memory().Value())
			if math.Abs(off) > cpuTolerance {
				t.Errorf("window of %s ending %s+<1s: metrics-ring serves %.4f cores, the cgroup used %.4f to %.4f (%+.1f%%, over %.0f%%)",
					m.Window.Duration, end.Format(time.RFC3339), got, lo, hi, 100*off, 100*cpuTolerance)
			}
			seen[end] = true
		}
		// The memory held does not change: the kubelet's working set now is the sample's.
		samples, err := env.kubelet.containers(ctx)
		if err != nil {
			return err
		}
		if s, ok := samples[key("burn", "burn")]; ok && uint64(c.Usage.Memory().Value()) == s.workingSet {
			if s.workingSet < 48<<20 {
				t.Errorf("working set %d is below the 48 MiB the container holds", s.workingSet)
			}
			memChecked++
		} else if ok {
			t.Logf("sample at %s: metrics-ring serves memory %d, the kubelet's working set is now %d", end.Format(time.RFC3339Nano), c.Usage.Memory().Value(), s.workingSet)
		}
		if len(seen) < windows || memChecked == 0 {
			return fmt.Errorf("%d of %d windows checked, memory checked %d times", len(seen), windows, memChecked)
		}
		return nil
	})
}

// TestKubectlTopAndV1beta1 reads the burning container through kubectl top (v1) and a v1beta1 client: both
// show what v1 serves for the same sample.
func TestKubectlTopAndV1beta1(t *testing.T) {
	needNode(t)
	t.Parallel()
	createPod(t, podOn("top", workload("burn", "-millicores=150", "-memory-mib=32")), allRunning)
	framework.Eventually(t, "kubectl top and v1beta1 agree with v1 on one sample", 2*time.Minute, func(ctx context.Context) error {
		before, err := podMetrics(ctx, "top")
		if err != nil {
			return err
		}
		out, err := env.cp.KubectlOutput(ctx, env.cp.AdminKubeconfig, "top", "pod", "top", "-n", namespace, "--containers")
		if err != nil {
			return err
		}
		beta, err := env.metrics.MetricsV1beta1().PodMetricses(namespace).Get(ctx, "top", metav1.GetOptions{})
		if err != nil {
			return err
		}
		after, err := podMetrics(ctx, "top")
		if err != nil {
			return err
		}
		if !before.Timestamp.Equal(&after.Timestamp) || !beta.Timestamp.Equal(&after.Timestamp) {
			return fmt.Errorf("a new sample arrived meanwhile (%s, %s, %s)", before.Timestamp, beta.Timestamp, after.Timestamp)
		}
		c, ok := findContainer(after, "burn")
		if !ok || len(beta.Containers) != 1 || beta.Containers[0].Name != "burn" {
			return fmt.Errorf("v1 serves %v, v1beta1 %+v", containerNames(after), beta.Containers)
		}
		if b := beta.Containers[0].Usage; !b.Cpu().Equal(*c.Usage.Cpu()) || !b.Memory().Equal(*c.Usage.Memory()) {
			t.Errorf("v1beta1 serves cpu %s memory %s, v1 cpu %s memory %s", b.Cpu(), b.Memory(), c.Usage.Cpu(), c.Usage.Memory())
		}
		_, rows, err := framework.Table(out, 2)
		if err != nil {
			return fmt.Errorf("kubectl top: %w: %s", err, out)
		}
		row, ok := rows["top/burn"]
		if !ok {
			return fmt.Errorf("kubectl top prints no row top/burn: %s", out)
		}
		if want := []string{framework.KubectlCPU(*c.Usage.Cpu()), framework.KubectlMem(*c.Usage.Memory())}; row[0] != want[0] || row[1] != want[1] {
			t.Errorf("kubectl top prints %v, v1 serves %v", row, want)
		}
		t.Logf("kubectl top pod top --containers: %v; v1 and v1beta1: cpu %s memory %s", row, c.Usage.Cpu(), c.Usage.Memory())
		return nil
	})
}
