package realinstall

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// metricsServerVersion is the metrics-server whose own end-to-end suite runs against the chart.
const metricsServerVersion = "v0.9.0"

// notOurs are the specs of metrics-server's suite skipped by name: each compares metrics-server's own identity,
// which a drop-in for its API need not share.
var notOurs = map[string]string{
	"passes readyz probe": "compares the exact verbose /readyz check names of metrics-server (metric-storage-ready, " +
		"metric-informer-sync...); metrics-ring's /readyz passes with checks of its own names",
	"passes livez probe": "compares the exact verbose /livez check names of metrics-server (metric-collection-timely...); " +
		"metrics-ring's /livez passes with checks of its own names",
	"exposes prometheus metrics": "compares the metrics_server_* metric names; metrics-ring's own metrics are metrics_ring_*",
}

// suiteResult is ginkgo's summary line: "Ran 8 of 11 Specs" and "8 Passed | 0 Failed | 0 Pending | 3 Skipped".
var (
	ranLine    = regexp.MustCompile(`Ran (\d+) of (\d+) Specs`)
	passedLine = regexp.MustCompile(`(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`)
)

// TestMetricsServerSuite runs metrics-server v0.9.0's own end-to-end suite (its test/e2e_test.go, built
// unchanged from its module) against the chart installed as its CI installs metrics-server's: its pods labelled
// k8s-app=metrics-server, --node-selector=metrics-server-skip!=true. What the suite assumes of its kind cluster
// is here: a node labelled metrics-server-skip=true (the simulated one), the resource-consumer image (the
// stand-in, framework.ResourceConsumerImage), and kind's kube-apiserver static pod showing the
// SidecarContainers gate (a Pod object of that name bound to the simulated node, which runs nothing: the gate is
// on by default since 1.33), without which the suite leaves its init-sidecar spec out.
func TestMetricsServerSuite(t *testing.T) {
	needNode(t)
	ensureInstalled(t, chart)
	if env.msSuiteErr != nil {
		t.Fatalf("building metrics-server %s's suite: %v", metricsServerVersion, env.msSuiteErr)
	}
	ctx := context.Background()
	if err := declareSidecarGate(ctx); err != nil {
		t.Fatal(err)
	}
	var skip []string
	for spec, why := range notOurs {
		t.Logf("skipping metrics-server's spec %q: it %s", spec, why)
		skip = append(skip, regexp.QuoteMeta(spec))
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.msSuite, "-test.v", "-test.timeout=14m", "-ginkgo.v", "-ginkgo.no-color",
		"-ginkgo.skip="+strings.Join(skip, "|"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.cp.AdminKubeconfig)
	observed := observeCPUConsumer(ctx)
	out, err := cmd.CombinedOutput()
	cancel()
	t.Logf("metrics-server %s's suite:\n%s", metricsServerVersion, out)
	t.Logf("what metrics-ring served for the suite's cpu-consumer (burning 50m; its CPU spec wants 40m to 60m):\n%s",
		strings.Join(<-observed, "\n"))
	ran, passed := ranLine.FindSubmatch(out), passedLine.FindSubmatch(out)
	if ran != nil && passed != nil {
		t.Logf("metrics-server's suite: ran %s of %s specs: %s passed, %s failed, %s skipped",
			ran[1], ran[2], passed[1], passed[2], passed[4])
	}
	if err != nil {
		t.Fatalf("metrics-server %s's end-to-end suite failed: %v", metricsServerVersion, err)
	}
	if ran == nil || passed == nil || string(passed[2]) != "0" {
		t.Fatalf("metrics-server's suite printed no summary with 0 failed")
	}
}

// declareSidecarGate creates the Pod the suite reads to decide whether the cluster runs sidecar containers: kind's
// kube-apiserver static pod. Bound to the simulated node, it never runs.
func declareSidecarGate(ctx context.Context) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-e2e-control-plane", Namespace: systemNamespace},
		Spec: corev1.PodSpec{
			NodeName: env.simNode,
			Containers: []corev1.Container{{Name: "kube-apiserver", Image: framework.PauseImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"kube-apiserver", "--feature-gates=SidecarContainers=true"}}},
		},
	}
	_, err := env.cp.Client.CoreV1().Pods(systemNamespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the stand-in for kind's kube-apiserver pod: %w", err)
	}
	return nil
}

// observeCPUConsumer polls what metrics-ring serves for the suite's cpu-consumer every second until ctx ends and
// returns the first distinct values: its CPU spec reads the first one served, and a container's first sample counts
// from its start, start-up included, when it has run 10 s (storage's minFreshSpan, as metrics-server's own
// threshold). Reads of 62m and 61m, out of the spec's 40m to 60m, were the stand-in's own burn (67m to 70m for 50m
// asked, before the workload regulated its CPU).
func observeCPUConsumer(ctx context.Context) <-chan []string {
	const first = 6
	done := make(chan []string, 1)
	go func() {
		var seen []string
		var last time.Time
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for len(seen) < first {
			select {
			case <-ctx.Done():
				done <- seen
				return
			case <-tick.C:
			}
			m, err := env.metrics.MetricsV1beta1().PodMetricses("default").Get(ctx, "cpu-consumer", metav1.GetOptions{})
			if err != nil || len(m.Containers) != 1 || m.Timestamp.Equal(&metav1.Time{Time: last}) {
				continue
			}
			last = m.Timestamp.Time
			since := "?"
			if p, err := env.cp.Client.CoreV1().Pods("default").Get(ctx, "cpu-consumer", metav1.GetOptions{}); err == nil &&
				len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				since = m.Timestamp.Sub(p.Status.ContainerStatuses[0].State.Running.StartedAt.Time).String()
			}
			seen = append(seen, fmt.Sprintf("  sample %s after the container started: %dm over %s",
				since, m.Containers[0].Usage.Cpu().MilliValue(), m.Window.Duration))
		}
		done <- seen
	}()
	return done
}
