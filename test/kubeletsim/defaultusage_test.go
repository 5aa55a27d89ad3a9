package kubeletsim

import "testing"

// TestDefaultWorkloadFitsTheNode checks that the default workload is one a node could run at any size of cluster:
// the server drops a node's value above its capacity as implausible (issue 26 finding 4), so a simulated node
// using more memory than it has would never be served, and a scale run would wait for it in vain.
func TestDefaultWorkloadFitsTheNode(t *testing.T) {
	for _, tc := range []struct {
		name        string
		nodes, pods int
	}{
		{"small", 3, 2},
		{"1,000 nodes x 30 pods", 1000, 30},
		{"10,000 nodes x 30 pods (the last 20)", 10000, 30},
		{"110 pods a node", 20, 110},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := max(0, tc.nodes-20); i < tc.nodes; i++ {
				mem, swap := uint64(NodeOverheadMemoryBytes), uint64(0)
				var cpu uint64 = NodeOverheadNanoCores
				for j := range tc.pods {
					g := i*tc.pods + j
					for c := range 2 {
						ncpu, m := DefaultUsage(g, c, 2)
						cpu, mem, swap = cpu+ncpu, mem+m, swap+DefaultSwap(g, c)
					}
				}
				if mem > nodeMemoryBytes || swap > NodeSwapBytes || cpu > nodeCPUCores*1e9 {
					t.Fatalf("node %d uses %d bytes of memory, %d of swap and %d nanocores; it has %d, %d and %d",
						i, mem, swap, cpu, uint64(nodeMemoryBytes), uint64(NodeSwapBytes), uint64(nodeCPUCores*1e9))
				}
			}
		})
	}
}
