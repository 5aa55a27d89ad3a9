package kubeletsim

import (
	"strings"
	"time"

	cadvisormetrics "github.com/google/cadvisor/lib/container"
	cadvisorprom "github.com/google/cadvisor/lib/metrics"
	info "github.com/google/cadvisor/lib/model"
	"k8s.io/component-base/metrics"
	"k8s.io/utils/clock"
)

// Labels the container runtime puts on containers; the kubelet maps them to Prometheus labels.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelContainerName = "io.kubernetes.container.name"
)

// newCadvisorRegistry wires a node's /metrics/cadvisor as the kubelet's server.go does: cAdvisor's own machine
// and container collectors, raw-registered in a component-base registry, with the kubelet's label function.
// Only the CPU and memory metric sets are enabled (the kubelet enables more) to keep responses small at scale.
func newCadvisorRegistry(n *node) metrics.KubeRegistry {
	included := cadvisormetrics.MetricSet{
		cadvisormetrics.CpuUsageMetrics:    struct{}{},
		cadvisormetrics.MemoryUsageMetrics: struct{}{},
	}
	opts := info.RequestOptions{IdType: info.TypeName, Count: 1, Recursive: true}
	r := metrics.NewKubeRegistry()
	r.RawMustRegister(cadvisorprom.NewPrometheusMachineCollector(cadvisorInfo{n}, included))
	r.RawMustRegister(cadvisorprom.NewPrometheusCollector(cadvisorInfo{n}, containerLabels, included,
		clock.RealClock{}, opts))
	return r
}

// containerLabels is the kubelet's containerPrometheusLabelsFunc (pkg/kubelet/server/server.go): every series
// carries id, name, image, pod, namespace and container, blank when unknown. Pod cgroups carry pod and namespace
// with container="" (the kubelet finds them by cgroup), and the root cgroup carries none: the series a PromQL
// query must exclude to avoid counting pods twice.
func containerLabels(c *info.ContainerInfo) map[string]string {
	var name string
	if len(c.Aliases) > 0 {
		name = c.Aliases[0]
	}
	return map[string]string{
		cadvisorprom.LabelID:    c.Name,
		cadvisorprom.LabelName:  name,
		cadvisorprom.LabelImage: c.Spec.Image,
		"pod":                   c.Spec.Labels[labelPodName],
		"namespace":             c.Spec.Labels[labelPodNamespace],
		"container":             c.Spec.Labels[labelContainerName],
	}
}

// cadvisorInfo is the infoProvider cAdvisor's collectors read: the node's synthetic cgroup tree.
type cadvisorInfo struct{ n *node }

func (ci cadvisorInfo) GetVersionInfo() (*info.VersionInfo, error) {
	return &info.VersionInfo{KernelVersion: "6.12.0-kubeletsim", ContainerOsVersion: "kubeletsim",
		CadvisorVersion: "v0.60.5"}, nil
}

func (ci cadvisorInfo) GetMachineInfo() (*info.MachineInfo, error) {
	return &info.MachineInfo{Timestamp: time.Now(), NumCores: nodeCPUCores, NumPhysicalCores: nodeCPUCores,
		NumSockets: 1, MemoryCapacity: nodeMemoryBytes, MachineID: ci.n.name, SystemUUID: ci.n.name}, nil
}

// GetRequestedContainersInfo returns the root cgroup (the node), one cgroup per pod and one per container, laid
// out like the systemd cgroup driver with containerd, all sampled at the request time in milliseconds.
func (ci cadvisorInfo) GetRequestedContainersInfo(string, info.RequestOptions) (map[string]*info.ContainerInfo, error) {
	now := timeNow().Truncate(time.Millisecond)
	nowNs := now.UnixNano()
	n := ci.n
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]*info.ContainerInfo, 1+2*len(n.pods))
	add := func(id, alias string, spec info.ContainerSpec, cpu, mem uint64) {
		spec.HasCpu, spec.HasMemory = true, true
		spec.Cpu.Limit, spec.Cpu.Period = 1024, 100000
		spec.Memory.Limit, spec.Memory.SwapLimit = nodeMemoryBytes, nodeMemoryBytes
		cinfo := &info.ContainerInfo{ContainerReference: info.ContainerReference{Name: id}, Spec: spec,
			Stats: []*info.ContainerStats{{Timestamp: now,
				Cpu:    &info.CpuStats{Usage: info.CpuUsage{Total: cpu, User: cpu - cpu/10, System: cpu / 10}},
				Memory: &info.MemoryStats{Usage: mem, WorkingSet: mem, RSS: mem}}}}
		if alias != "" {
			cinfo.Aliases = []string{alias}
			cinfo.Namespace = "containerd"
		}
		out[id] = cinfo
	}
	nodeMem := uint64(NodeOverheadMemoryBytes)
	for _, p := range n.pods {
		podCgroup := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
			strings.ReplaceAll(p.uid, "-", "_") + ".slice"
		var podCPU, podMem uint64
		for _, c := range p.containers {
			v := c.cpu.at(nowNs)
			podCPU, podMem = podCPU+v, podMem+c.memory
			add(podCgroup+"/cri-containerd-"+c.id+".scope", c.id, info.ContainerSpec{CreationTime: c.start,
				Image: c.image, Labels: map[string]string{labelPodName: p.name, labelPodNamespace: p.namespace,
					labelContainerName: c.name}}, v, c.memory)
		}
		nodeMem += podMem
		add(podCgroup, "", info.ContainerSpec{CreationTime: p.start,
			Labels: map[string]string{labelPodName: p.name, labelPodNamespace: p.namespace}}, podCPU, podMem)
	}
	add("/", "", info.ContainerSpec{CreationTime: n.boot}, n.cpu.at(nowNs), nodeMem)
	return out, nil
}
