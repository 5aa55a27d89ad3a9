package kubeletsim

// Fresh stats (Config.FreshStats) make the fast renderer's responses differ from scrape to scrape the way a real
// kubelet's do (issue 29 item 5), where the default renders one time for every line and a constant working set:
// - a real kubelet (CRI stats) reads each container's cgroup in turn, so each container's lines carry their own
//   time, a few milliseconds apart, new at every scrape; here a container's time is the request's less a stagger
//   of 0 to 63 ms of its own, and its CPU is sampled at that time, so counter and time still agree exactly;
// - a working set moves between any two readings; here it wanders within 1/16 above the container's set value,
//   with the time, so the bytes of every memory line change too (Truth, and the set value, stay the same).
// Pod lines take their first container's time; the node's lines the request's.

// stagger is how far before the request container c's stats are stamped, in milliseconds (0 to 63).
func (c *container) stagger() int64 {
	var h uint32 = 2166136261
	for i := 0; i < len(c.id); i++ {
		h = (h ^ uint32(c.id[i])) * 16777619
	}
	return int64(h % 64)
}

// freshMemory is c's working set read at ms: its set value plus up to 1/16 of it, moving with the time.
func (c *container) freshMemory(ms int64) uint64 {
	return c.memory + c.memory/16*uint64(ms%997)/997
}

// renderFresh is renderResource with fresh stats; needs n.mu.
func (n *node) renderFresh(b []byte, ms int64) []byte {
	cs, pods := n.sortedLocked()
	at := func(c *container) (cpu, mem uint64, t int64) {
		t = ms - c.stagger()
		return c.cpu.at(t * 1e6), c.freshMemory(t), t
	}
	if len(cs) > 0 {
		b = header(b, famContainerCPU)
		for _, pc := range cs {
			cpu, _, t := at(pc.c)
			b = containerSample(b, famContainerCPU.name, pc, float64(cpu)/1e9, t)
		}
		b = header(b, famContainerMem)
		for _, pc := range cs {
			_, mem, t := at(pc.c)
			b = containerSample(b, famContainerMem.name, pc, float64(mem), t)
		}
		b = header(b, famContainerStart)
		for _, pc := range cs {
			b = containerSample(b, famContainerStart.name, pc, float64(pc.c.start.UnixNano())/1e9, -1)
		}
		b = header(b, famContainerSwap)
		for _, pc := range cs {
			b = containerSample(b, famContainerSwap.name, pc, float64(pc.c.swap), ms-pc.c.stagger())
		}
	}
	nodeMem, nodeSwap := uint64(NodeOverheadMemoryBytes), uint64(0)
	for _, p := range n.pods {
		for _, c := range p.containers {
			nodeMem, nodeSwap = nodeMem+c.freshMemory(ms), nodeSwap+c.swap
		}
	}
	b = appendSample(header(b, famNodeCPU), famNodeCPU.name, float64(n.cpu.at(ms*1e6))/1e9, ms)
	b = appendSample(header(b, famNodeMem), famNodeMem.name, float64(nodeMem), ms)
	b = appendSample(header(b, famNodeSwap), famNodeSwap.name, float64(nodeSwap), ms)
	if len(pods) == 0 {
		return b
	}
	for _, f := range []family{famPodCPU, famPodMem, famPodSwap} {
		b = header(b, f)
		for _, p := range pods {
			t := ms
			if len(p.containers) > 0 {
				t -= p.containers[0].stagger()
			}
			var cpu, mem, swap uint64
			for _, c := range p.containers {
				cpu, mem, swap = cpu+c.cpu.at(t*1e6), mem+c.freshMemory(t), swap+c.swap
			}
			v := float64(swap)
			switch f {
			case famPodCPU:
				v = float64(cpu) / 1e9
			case famPodMem:
				v = float64(mem)
			}
			b = podSample(b, f.name, p, v, t)
		}
	}
	return b
}
