package storage

import "fmt"

// Capacity is what a node can physically do: its status.capacity, in plain numbers. A zero field is unknown.
type Capacity struct {
	CPU    float64 // cores
	Memory float64 // bytes
}

// plausibleMargin is how far above its node's capacity a served value may be (a factor) before it is taken for
// garbage (DESIGN.md section 2, "Plausibility"). No true usage exceeds the capacity, but measured rates jitter
// above it: a kubelet stamps a counter read a little after its stats time (a few milliseconds over a 1 s
// resolution is under 1 %), a container at its CPU limit reads a few percent over it from the CFS period's
// accounting, and a PromQL rate() extrapolates to its window's edges (up to 10 % of it). 10 % covers those; the
// garbage it is there to stop is orders of magnitude off (241 cores from a 19-core node, 10,017 from any).
const plausibleMargin = 1.1

// exceeds reports whether a usage of cpu nanocores and mem bytes is more than c can do.
func (c Capacity) exceeds(cpu, mem float64) bool {
	return (c.CPU > 0 && cpu > c.CPU*1e9*plausibleMargin) || (c.Memory > 0 && mem > c.Memory*plausibleMargin)
}

// judgeNode stops serving a node's series when what it would serve is more than the node can do. Called with s.mu
// held, after the sample is recorded.
func (s *Storage) judgeNode(smp *NodeSample, sr *series, rej *Rejection) {
	c, ok := s.capacity[smp.Node]
	if !ok || sr.bad {
		return
	}
	u, _, _, ok := sr.usage(s.opts.Window, s.opts.Resolution, s.opts.StaleAfter)
	if ok && c.exceeds(float64(u.CPU), float64(u.Memory)) {
		sr.bad = true // serve nothing rather than the value, or an older one, until a plausible report
		rej.Implausible++
		if rej.Example == "" {
			rej.Example = implausible(smp.Node, smp.Node, u, c)
		}
	}
}

// judgePod stops serving a pod (and so its containers) when its containers sum to more than its node can do; smp
// is the first sample of it in the batch seq. A node with no capacity known bounds nothing: a node object without
// status.capacity, or one the informer has not delivered yet, should not lose its pods' metrics for a field the
// bound is only a safety net on. Called with s.mu held.
func (s *Storage) judgePod(smp *ContainerSample, seq uint64, rej *Rejection) {
	p := s.slots.get(podKey{smp.Namespace, smp.Pod})
	c, ok := s.capacity[p.node]
	p.implausible = false
	if !ok {
		return
	}
	var cpu, mem float64 // as floats, so that no sum overflows
	reported := 0
	for _, ct := range p.containers {
		if ct.batch == seq {
			reported++
		}
		if u, _, _, ok := ct.usage(s.opts.Window, s.opts.Resolution, s.opts.StaleAfter); ok {
			cpu, mem = cpu+float64(u.CPU), mem+float64(u.Memory)
		}
	}
	if !c.exceeds(cpu, mem) {
		return
	}
	p.implausible = true
	rej.Implausible += reported
	if rej.Example == "" {
		rej.Example = implausible(smp.Namespace+"/"+smp.Pod, p.node, Usage{CPU: saturate(cpu), Memory: saturate(mem)}, c)
	}
}

// implausible describes a value above its node's capacity for a log line.
func implausible(name, node string, u Usage, c Capacity) string {
	return fmt.Sprintf("%s: cpu=%.3f cores memory=%d bytes, above node %q's capacity (cpu=%g cores memory=%g "+
		"bytes) by more than %g%%", name, float64(u.CPU)/1e9, u.Memory, node, c.CPU, c.Memory,
		(plausibleMargin-1)*100)
}
