package kubeletsim

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
)

// checkNode asserts that two scrapes of a node's /metrics/resource agree with the truth: memory exactly, CPU
// counters advancing at the true rate (1 %), the node and pod series consistent with their containers.
func checkNode(t *testing.T, s *Sim, truth Truth, node string, a, b map[string]*dmf) {
	t.Helper()
	mem := series(b["container_memory_working_set_bytes"], "namespace", "pod", "container")
	swap := series(b["container_swap_usage_bytes"], "namespace", "pod", "container")
	cpuA := series(a["container_cpu_usage_seconds_total"], "namespace", "pod", "container")
	cpuB := series(b["container_cpu_usage_seconds_total"], "namespace", "pod", "container")
	want := 0
	for _, p := range s.Pods() {
		if p.Node != node {
			continue
		}
		for _, c := range p.Containers {
			want++
			k := p.Namespace + "/" + p.Name + "/" + c
			u := truth.Pods[podKey(p.Namespace, p.Name)][c]
			m, ok := mem[k]
			if !ok {
				t.Errorf("%s: no memory series for %s", node, k)
				continue
			}
			if got := value(m); got != float64(u.MemoryBytes) {
				t.Errorf("%s: memory of %s = %v, truth %d", node, k, got, u.MemoryBytes)
			}
			if sw, ok := swap[k]; !ok || value(sw) != float64(u.SwapBytes) {
				t.Errorf("%s: swap of %s = %v (reported %v), truth %d", node, k, value(sw), ok, u.SwapBytes)
			}
			if cpuA[k] == nil || cpuB[k] == nil {
				t.Errorf("%s: no CPU series for %s", node, k)
				continue
			}
			if r := rateBetween(t, cpuA[k], cpuB[k]); !within(r, float64(u.CPUNanoCores), 0.01) {
				t.Errorf("%s: CPU rate of %s = %.0f nanocores, truth %d", node, k, r, u.CPUNanoCores)
			}
		}
	}
	if len(mem) != want {
		t.Errorf("%s: %d container memory series, want %d", node, len(mem), want)
	}
	nu := truth.Nodes[node]
	nodeMem := b["node_memory_working_set_bytes"].GetMetric()[0]
	if value(nodeMem) != float64(nu.MemoryBytes) {
		t.Errorf("%s: node memory %v, truth %d", node, value(nodeMem), nu.MemoryBytes)
	}
	if nodeSwap := b["node_swap_usage_bytes"].GetMetric()[0]; value(nodeSwap) != float64(nu.SwapBytes) {
		t.Errorf("%s: node swap %v, truth %d", node, value(nodeSwap), nu.SwapBytes)
	}
	r := rateBetween(t, a["node_cpu_usage_seconds_total"].GetMetric()[0], b["node_cpu_usage_seconds_total"].GetMetric()[0])
	if !within(r, float64(nu.CPUNanoCores), 0.01) {
		t.Errorf("%s: node CPU rate %.0f nanocores, truth %d", node, r, nu.CPUNanoCores)
	}
	for k, m := range series(b["pod_memory_working_set_bytes"], "namespace", "pod") {
		var sum uint64
		for _, u := range truth.Pods[k] {
			sum += u.MemoryBytes
		}
		if value(m) != float64(sum) {
			t.Errorf("%s: pod memory of %s = %v, want the sum of its containers %d", node, k, value(m), sum)
		}
	}
}

func TestResourceMetricsEqualTruth(t *testing.T) {
	for _, fast := range []bool{false, true} {
		s := startSim(t, Config{Nodes: 2, PodsPerNode: 3, ContainersPerPod: 2, Namespaces: 2, FastResource: fast})
		c := client(t, s)
		truth := s.Truth()
		if len(truth.Nodes) != 2 || len(truth.Pods) != 6 {
			t.Fatalf("truth has %d nodes and %d pods, want 2 and 6", len(truth.Nodes), len(truth.Pods))
		}
		swapping, notSwapping := 0, 0
		for _, cs := range truth.Pods {
			for _, u := range cs {
				if u.SwapBytes > 0 {
					swapping++
				} else {
					notSwapping++
				}
			}
		}
		if swapping == 0 || notSwapping == 0 {
			t.Errorf("%d containers swap and %d do not: want some of each", swapping, notSwapping)
		}
		for _, node := range s.Nodes() {
			a, b := scrapeTwice(t, s, c, node, "/metrics/resource")
			checkNode(t, s, truth, node, a, b)
		}
	}
}

func TestSetContainerAndSetPodChangeWhatIsServed(t *testing.T) {
	s := startSim(t, Config{Nodes: 1, PodsPerNode: 2, ContainersPerPod: 2})
	c := client(t, s)
	p := s.Pods()[0]
	if err := s.SetContainer(p.Namespace, p.Name, "sidecar", 1.5, 123456789); err != nil {
		t.Fatalf("SetContainer: %v", err)
	}
	q := s.Pods()[1]
	if err := s.SetPod(q.Namespace, q.Name, 0.25, 50<<20); err != nil {
		t.Fatalf("SetPod: %v", err)
	}
	truth := s.Truth()
	if u := truth.Pods[podKey(p.Namespace, p.Name)]["sidecar"]; u != (Usage{CPUNanoCores: 1_500_000_000, MemoryBytes: 123456789}) {
		t.Fatalf("truth after SetContainer = %+v", u)
	}
	var want Usage
	want.CPUNanoCores, want.MemoryBytes = NodeOverheadNanoCores, NodeOverheadMemoryBytes
	for _, cs := range truth.Pods {
		for _, u := range cs {
			want.CPUNanoCores += u.CPUNanoCores
			want.MemoryBytes += u.MemoryBytes
			want.SwapBytes += u.SwapBytes
		}
	}
	if got := truth.Nodes[p.Node]; got != want {
		t.Fatalf("node truth %+v, want overhead plus containers %+v", got, want)
	}
	a, b := scrapeTwice(t, s, c, p.Node, "/metrics/resource")
	checkNode(t, s, truth, p.Node, a, b)

	for _, bad := range []func() error{
		func() error { return s.SetContainer(p.Namespace, p.Name, "nope", 1, 1) },
		func() error { return s.SetContainer(p.Namespace, "nope", "app", 1, 1) },
		func() error { return s.SetPod("nope", p.Name, 1, 1) },
		func() error { return s.SetPod(p.Namespace, p.Name, -1, 1) },
	} {
		if err := bad(); err == nil {
			t.Error("bad input accepted")
		}
	}
	if s.Truth().Pods[podKey(p.Namespace, p.Name)]["sidecar"] != (Usage{CPUNanoCores: 1_500_000_000, MemoryBytes: 123456789}) {
		t.Error("a rejected call changed the workload")
	}
}

func TestCounterIsContinuousAcrossRateChanges(t *testing.T) {
	c := counter{base: 1000, since: 0, rate: 2_000_000_000} // 2 cores
	if got := c.at(3e9); got != 1000+6e9 {
		t.Fatalf("after 3 s at 2 cores: %d", got)
	}
	c.set(3e9, 500_000_000)
	if got := c.at(3e9); got != 1000+6e9 {
		t.Fatalf("rate change moved the counter: %d", got)
	}
	if got := c.at(5e9); got != 1000+6e9+1e9 {
		t.Fatalf("2 s at half a core after the change: %d", got)
	}
	if got := c.at(1e9); got != 1000+6e9 {
		t.Fatalf("a time before the last change must not go backwards: %d", got)
	}
	if got := mulDiv(64e9, 1e13, 1e9); got != 64e13 {
		t.Fatalf("mulDiv overflowed: %d", got)
	}
}

// TestResourceFormatMatchesFixture compares the families, HELP and TYPE lines (stability markers included) and
// which families carry timestamps with the bytes a real kubelet sent.
func TestResourceFormatMatchesFixture(t *testing.T) {
	fixture, err := os.ReadFile("/work/shared/fixtures/kubelet/metrics-resource-30pods.txt")
	if err != nil {
		t.Skipf("fixture not available: %v", err)
	}
	s := startSim(t, Config{Nodes: 1, PodsPerNode: 3, ContainersPerPod: 2})
	_, body := scrape(t, s, client(t, s), s.Nodes()[0], "/metrics/resource")
	gotMeta, gotTS := shape(body)
	wantMeta, wantTS := shape(fixture)
	if strings.Join(gotMeta, "\n") != strings.Join(wantMeta, "\n") {
		t.Errorf("HELP/TYPE lines differ from the kubelet's:\ngot:\n%s\nwant:\n%s",
			strings.Join(gotMeta, "\n"), strings.Join(wantMeta, "\n"))
	}
	for name, want := range wantTS {
		if gotTS[name] != want {
			t.Errorf("family %s: timestamped=%v, the kubelet's is %v", name, gotTS[name], want)
		}
	}
	for _, marker := range []string{"[STABLE]", "[ALPHA]"} {
		if !bytes.Contains(body, []byte(marker)) {
			t.Errorf("no %s marker in output", marker)
		}
	}
}

// shape returns the comment lines and, per metric name, whether its samples carry a timestamp.
func shape(b []byte) (meta []string, timestamped map[string]bool) {
	timestamped = map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			meta = append(meta, line)
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		} else {
			name, rest, _ = strings.Cut(line, " ")
		}
		timestamped[name] = len(strings.Fields(rest)) == 2
	}
	return meta, timestamped
}
