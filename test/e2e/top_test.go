package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// settle bounds how long a fresh or just-restarted pipeline may take to serve everything: two samples per
// series at one resolution each, plus slack for a loaded two-core machine.
const settle = 30 * time.Second

func nodeAllocatable(t *testing.T) map[string]corev1.ResourceList {
	t.Helper()
	nodes, err := env.cp.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := map[string]corev1.ResourceList{}
	for _, n := range nodes.Items {
		alloc[n.Name] = n.Status.Allocatable
	}
	return alloc
}

func wantPodRow(usage map[string]kubeletsim.Usage) []string {
	cpu, mem := framework.CPUQuantity(0), framework.MemQuantity(0)
	for _, u := range usage {
		cpu.Add(framework.CPUQuantity(u.CPUNanoCores))
		mem.Add(framework.MemQuantity(u.MemoryBytes))
	}
	return []string{framework.KubectlCPU(cpu), framework.KubectlMem(mem)}
}

// wantPodSwapRow is wantPodRow with the SWAP(bytes) column of --show-swap: the pod's swap summed over its
// containers, printed in whole mebibytes like memory.
func wantPodSwapRow(usage map[string]kubeletsim.Usage) []string {
	swap := framework.MemQuantity(0)
	for _, u := range usage {
		swap.Add(framework.MemQuantity(u.SwapBytes))
	}
	return append(wantPodRow(usage), framework.KubectlMem(swap))
}

// topFlags are the two ways every kubectl top test runs: as it was, and with the swap columns.
var topFlags = []struct {
	name string
	args []string
}{{"", nil}, {"--show-swap", []string{"--show-swap"}}}

func checkHeader(got []string, want ...string) error {
	if strings.Join(got, " ") != strings.Join(want, " ") {
		return fmt.Errorf("header %q, want %q", got, want)
	}
	return nil
}

func TestKubectlTopNodes(t *testing.T) {
	alloc := nodeAllocatable(t)
	for _, f := range topFlags {
		t.Run(f.name, func(t *testing.T) {
			framework.Eventually(t, "kubectl top nodes "+f.name+" to print the truth", settle, func(ctx context.Context) error {
				return env.cp.TopNodesMatchTruth(ctx, env.sim.Truth().Nodes, alloc, f.args...)
			})
		})
	}
	if err := topReadsV1(context.Background(), "nodes", "top", "nodes"); err != nil {
		t.Fatal(err)
	}
}

// topReadsV1 runs kubectl with -v=6, which logs every request's URL, and checks that it read
// /apis/metrics.k8s.io/v1/<resource> (kubectl 1.37 prefers v1 when it is served) and nothing of v1beta1.
func topReadsV1(ctx context.Context, resource string, args ...string) error {
	out, err := env.cp.Kubectl(ctx, "", append(args, "-v=6")...)
	if err != nil {
		return err
	}
	var urls []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "/apis/metrics.k8s.io/") {
			urls = append(urls, l)
		}
	}
	if !strings.Contains(out, "/apis/metrics.k8s.io/v1/"+resource) || strings.Contains(out, "/apis/metrics.k8s.io/v1beta1/") {
		return fmt.Errorf("kubectl %s read %d metrics.k8s.io URLs, want /apis/metrics.k8s.io/v1/%s and no v1beta1:\n%s",
			strings.Join(args, " "), len(urls), resource, strings.Join(urls, "\n"))
	}
	return nil
}

func TestKubectlTopPodsAllNamespaces(t *testing.T) {
	for _, f := range topFlags {
		t.Run(f.name, func(t *testing.T) {
			framework.Eventually(t, "kubectl top pods -A "+f.name+" to print the truth", settle, func(ctx context.Context) error {
				truth := env.sim.Truth()
				out, err := env.cp.Kubectl(ctx, "", append([]string{"top", "pods", "-A"}, f.args...)...)
				if err != nil {
					return err
				}
				header, rows, err := framework.Table(out, 2)
				if err != nil {
					return err
				}
				columns, row := []string{"NAMESPACE", "NAME", "CPU(cores)", "MEMORY(bytes)"}, wantPodRow
				if len(f.args) > 0 {
					columns, row = append(columns, "SWAP(bytes)"), wantPodSwapRow
				}
				if err := checkHeader(header, columns...); err != nil {
					return err
				}
				want := map[string][]string{}
				for key, containers := range truth.Pods {
					want[key] = row(containers)
				}
				if d := framework.DiffRows(want, rows); d != "" {
					return errors.New(d)
				}
				return nil
			})
		})
	}
	if err := topReadsV1(context.Background(), "pods", "top", "pods", "-A"); err != nil {
		t.Fatal(err)
	}
}

func TestKubectlTopPodsNamespaceAndSelector(t *testing.T) {
	ns := env.sim.Pods()[0].Namespace
	const selector = "app=app-1"
	pods, err := env.cp.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("the simulator registered no pod with %s in %s", selector, ns)
	}
	framework.Eventually(t, "kubectl top pods -n "+ns+" -l "+selector+" to print the truth", settle, func(ctx context.Context) error {
		truth := env.sim.Truth()
		out, err := env.cp.Kubectl(ctx, "", "top", "pods", "-n", ns, "-l", selector)
		if err != nil {
			return err
		}
		header, rows, err := framework.Table(out, 1)
		if err != nil {
			return err
		}
		if err := checkHeader(header, "NAME", "CPU(cores)", "MEMORY(bytes)"); err != nil {
			return err
		}
		want := map[string][]string{}
		for _, p := range pods.Items {
			want[p.Name] = wantPodRow(truth.Pods[ns+"/"+p.Name])
		}
		if d := framework.DiffRows(want, rows); d != "" {
			return errors.New(d)
		}
		return nil
	})
}

// TestWorkloadChangeShowsUp changes one pod's usage and expects both the exact values (client-go) and kubectl's
// rendering to follow within two resolutions: one scrape to see the new rate begin, one more to measure it.
func TestWorkloadChangeShowsUp(t *testing.T) {
	p := env.sim.Pods()[0]
	before := env.sim.Truth().Pods[p.Namespace+"/"+p.Name]
	t.Cleanup(func() {
		for c, u := range before {
			if err := env.sim.SetContainer(p.Namespace, p.Name, c, float64(u.CPUNanoCores)/1e9, u.MemoryBytes); err != nil {
				t.Errorf("restoring %s/%s %s: %v", p.Namespace, p.Name, c, err)
			}
		}
	})
	// Make sure the old values are served first, so the change is what the poll below observes.
	framework.Eventually(t, "the pod's current metrics", settle, func(ctx context.Context) error {
		return podMatchesTruth(ctx, p.Namespace, p.Name)
	})
	if err := env.sim.SetPod(p.Namespace, p.Name, 0.75, 300<<20); err != nil {
		t.Fatal(err)
	}
	// Bounded by two resolutions (one scrape to see the new rate begin, one more to measure it over a whole
	// window), plus two seconds for scrapes and requests on a busy two-core machine.
	framework.EventuallyEvery(t, "the changed usage of "+p.Namespace+"/"+p.Name, 200*time.Millisecond, 2*resolution+2*time.Second, func(ctx context.Context) error {
		return podMatchesTruth(ctx, p.Namespace, p.Name)
	})
	want := wantPodRow(env.sim.Truth().Pods[p.Namespace+"/"+p.Name])
	out, err := env.cp.Kubectl(context.Background(), "", "top", "pod", p.Name, "-n", p.Namespace, "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out); strings.Join(got, " ") != strings.Join(append([]string{p.Name}, want...), " ") {
		t.Fatalf("kubectl top pod printed %q, want %s %v", out, p.Name, want)
	}
}
