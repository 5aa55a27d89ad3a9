package kubeletsim

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/kubernetes/pkg/kubelet/metrics/collectors"
	"k8s.io/kubernetes/pkg/kubelet/server/stats"
)

// newResourceRegistry wires a node's /metrics/resource exactly as the kubelet's server.go does: the kubelet's
// own collector in a fresh component-base registry, so names, HELP texts, stability markers, family order and
// timestamps are the kubelet's and not our imitation of them.
func newResourceRegistry(n *node) metrics.KubeRegistry {
	r := metrics.NewKubeRegistry()
	r.CustomMustRegister(collectors.NewResourceMetricsCollector(summaryProvider{n}))
	return r
}

// summaryProvider is the stats.SummaryProvider the collector reads: a snapshot of one node's synthetic stats.
type summaryProvider struct{ n *node }

var _ stats.SummaryProvider = summaryProvider{}

func (sp summaryProvider) Get(ctx context.Context, _ bool) (*statsapi.Summary, error) {
	return sp.GetCPUAndMemoryStats(ctx)
}

// GetCPUAndMemoryStats samples every counter at the request time truncated to milliseconds, the precision of
// the exposition format's timestamps, so a counter and its printed timestamp agree exactly.
func (sp summaryProvider) GetCPUAndMemoryStats(context.Context) (*statsapi.Summary, error) {
	now := timeNow().Truncate(time.Millisecond)
	ts := metav1.NewTime(now)
	nowNs := now.UnixNano()
	n := sp.n
	var foreign []*pod // reported after the node's own, not part of its totals
	if f := n.foreign.Load(); f != nil {
		foreign = f.pods(nowNs)
	}

	inst := n.instances.Load()
	oldTurn := inst != nil && inst.scrapes.Add(1)%inst.every == 0
	n.mu.Lock()
	defer n.mu.Unlock()
	own := len(n.pods)
	pods := n.pods
	if len(foreign) > 0 {
		pods = append(pods[:own:own], foreign...)
	}
	// One backing array per kind keeps a scrape of a big node to a handful of allocations.
	var nc int
	for _, p := range pods {
		nc += len(p.containers)
	}
	u64 := make([]uint64, 0, 4*(nc+len(pods)+1))
	ptr := func(v uint64) *uint64 { u64 = append(u64, v); return &u64[len(u64)-1] }
	cpus := make([]statsapi.CPUStats, 0, nc+len(pods)+1)
	mems := make([]statsapi.MemoryStats, 0, nc+len(pods)+1)
	swaps := make([]statsapi.SwapStats, 0, nc+len(pods)+1)
	cpu := func(ns uint64, rate uint64) *statsapi.CPUStats {
		cpus = append(cpus, statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr(ns), UsageNanoCores: ptr(rate)})
		return &cpus[len(cpus)-1]
	}
	mem := func(b uint64) *statsapi.MemoryStats {
		ws := ptr(b)
		mems = append(mems, statsapi.MemoryStats{Time: ts, WorkingSetBytes: ws, UsageBytes: ws})
		return &mems[len(mems)-1]
	}
	swap := func(b uint64) *statsapi.SwapStats {
		swaps = append(swaps, statsapi.SwapStats{Time: ts, SwapUsageBytes: ptr(b)})
		return &swaps[len(swaps)-1]
	}

	nodeMem, nodeSwap := uint64(NodeOverheadMemoryBytes), uint64(0)
	summary := &statsapi.Summary{Pods: make([]statsapi.PodStats, len(pods))}
	cstats := make([]statsapi.ContainerStats, nc)
	for i, p := range pods {
		ps := &summary.Pods[i]
		ps.PodRef = statsapi.PodReference{Name: p.name, Namespace: p.namespace, UID: p.uid}
		ps.StartTime = metav1.NewTime(p.start)
		ps.Containers, cstats = cstats[:len(p.containers):len(p.containers)], cstats[len(p.containers):]
		var podCPU, podRate, podMem, podSwap uint64
		for j, c := range p.containers {
			if inst != nil {
				c = inst.container(p, c, oldTurn)
			}
			v := c.cpu.at(nowNs)
			podCPU, podRate, podMem, podSwap = podCPU+v, podRate+c.cpu.rate, podMem+c.memory, podSwap+c.swap
			ps.Containers[j] = statsapi.ContainerStats{Name: c.name, StartTime: metav1.NewTime(c.start),
				CPU: cpu(v, c.cpu.rate), Memory: mem(c.memory), Swap: swap(c.swap)}
		}
		if i < own {
			nodeMem, nodeSwap = nodeMem+podMem, nodeSwap+podSwap
		}
		ps.CPU, ps.Memory, ps.Swap = cpu(podCPU, podRate), mem(podMem), swap(podSwap)
	}
	summary.Node = statsapi.NodeStats{NodeName: n.name, StartTime: metav1.NewTime(n.boot),
		CPU: cpu(n.cpu.at(nowNs), n.cpu.rate), Memory: mem(nodeMem), Swap: swap(nodeSwap)}
	return summary, nil
}
