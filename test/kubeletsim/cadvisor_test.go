package kubeletsim

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestCadvisorCarriesTheSameContainerSeries checks that a Prometheus scraping /metrics/cadvisor too sees the
// same container series names and values as /metrics/resource, plus the pod and root cgroups a query must
// exclude, labelled as the kubelet labels them.
func TestCadvisorCarriesTheSameContainerSeries(t *testing.T) {
	s := startSim(t, Config{Nodes: 1, PodsPerNode: 2, ContainersPerPod: 2, Namespaces: 2})
	c := client(t, s)
	node := s.Nodes()[0]
	truth := s.Truth()
	resource, _ := scrape(t, s, c, node, "/metrics/resource")
	cad, _ := scrape(t, s, c, node, "/metrics/cadvisor")

	for _, name := range []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes"} {
		mf := cad[name]
		if mf == nil {
			t.Fatalf("/metrics/cadvisor has no %s", name)
		}
		for _, m := range mf.GetMetric() {
			for _, l := range []string{"container", "namespace", "pod", "id", "image", "name"} {
				if !hasLabel(m, l) {
					t.Errorf("%s series %v lacks label %q", name, m.GetLabel(), l)
				}
			}
			if m.GetTimestampMs() == 0 {
				t.Errorf("%s series %v has no timestamp", name, m.GetLabel())
			}
		}
		// Every container the kubelet reports on /metrics/resource is in /metrics/cadvisor under the same name.
		cadSeries := series(mf, "namespace", "pod", "container")
		for k := range series(resource[name], "namespace", "pod", "container") {
			if cadSeries[k] == nil {
				t.Errorf("%s{%s} is on /metrics/resource but not on /metrics/cadvisor", name, k)
			}
		}
	}

	mem := series(cad["container_memory_working_set_bytes"], "namespace", "pod", "container")
	for pk, cs := range truth.Pods {
		var sum uint64
		for cn, u := range cs {
			sum += u.MemoryBytes
			m := mem[pk+"/"+cn]
			if m == nil {
				t.Errorf("no cadvisor memory series for %s/%s", pk, cn)
				continue
			}
			if value(m) != float64(u.MemoryBytes) {
				t.Errorf("cadvisor memory of %s/%s = %v, truth %d", pk, cn, value(m), u.MemoryBytes)
			}
			if labelValue(m, "image") == "" || labelValue(m, "name") == "" || labelValue(m, "id") == "" {
				t.Errorf("container series %s/%s lacks image, name or id: %v", pk, cn, m.GetLabel())
			}
		}
		podCgroup := mem[pk+"/"]
		if podCgroup == nil || value(podCgroup) != float64(sum) {
			t.Errorf("pod cgroup series (container=\"\") of %s = %v, want %d", pk, podCgroup, sum)
		}
	}
	root := series(cad["container_memory_working_set_bytes"], "id")["/"]
	if root == nil || value(root) != float64(truth.Nodes[node].MemoryBytes) {
		t.Errorf("root cgroup memory = %v, want node truth %d", root, truth.Nodes[node].MemoryBytes)
	}
	for _, m := range cad["container_cpu_usage_seconds_total"].GetMetric() {
		if labelValue(m, "cpu") != "total" {
			t.Errorf("container_cpu_usage_seconds_total without cpu=\"total\": %v", m.GetLabel())
		}
	}
	if cad["machine_cpu_cores"] == nil {
		t.Error("no machine_cpu_cores from the machine collector")
	}
}

func hasLabel(m *dto.Metric, name string) bool {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return true
		}
	}
	return false
}
