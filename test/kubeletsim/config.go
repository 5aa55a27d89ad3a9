package kubeletsim

import (
	"fmt"
	"time"
)

// Config describes the simulated cluster. Zero values take the defaults documented on each field.
type Config struct {
	Nodes, PodsPerNode, ContainersPerPod, Namespaces int // defaults 1, 2, 2, 1 when 0
	// NodePrefix names nodes NodePrefix + index; default "sim-node-".
	NodePrefix string
	// PodPrefix names pod j of node i fmt.Sprintf("%s%d-%d", PodPrefix, i, j); default "sim-pod-". Its
	// namespace is "sim-ns-<k>" with k = global pod index mod Namespaces. With Spread, i and j number the pod
	// (global index i*PodsPerNode+j) and no longer say its node.
	PodPrefix string
	// Spread places each of the Nodes x PodsPerNode pods on a node drawn at random (from SpreadSeed), rather than
	// PodsPerNode on every node: the spread a churning cluster's nodes settle into (a pod deleted at random and its
	// successor on a random node leave each pod on a uniformly random node), so that a soak begins settled and a
	// server's buffers sized by the largest node stop growing with the widening spread. The same seed places alike
	// in every shard.
	Spread     bool
	SpreadSeed uint64
	// Host is the loopback address every node binds and publishes as its InternalIP; default 127.0.0.1.
	Host string
	// Labels are extra labels on every registered Pod; each pod also gets app=app-<global index mod 3>.
	Labels map[string]string
	// WorkloadPods, when set, also labels every pod workload=w-<k>, so that in each namespace the selector
	// workload=w-<k> matches exactly WorkloadPods pods (the last k of a namespace may match fewer): one
	// Deployment's pods, as an HPA selects them (WorkloadSelector names them).
	WorkloadPods int
	// FastResource serves plain-text /metrics/resource requests from a hand-written renderer that tests hold
	// byte-identical to the kubelet's collector, about 10x cheaper; for scale runs. Other formats (protobuf,
	// OpenMetrics) always go through the kubelet's collector.
	FastResource bool
	// FreshStats, with FastResource, has every scrape carry new times and values on every container line, as a
	// real kubelet's do (see fresh.go); the default stamps one time on every line and repeats working sets.
	FreshStats bool
	// PortBase, when set, has node i listen on Host:PortBase+i rather than on a port the kernel picks, so a
	// process can register nodes whose kubelets another process serves (see Shards).
	PortBase int
	// Shards splits serving over processes: Start listens only for the nodes whose index mod Shards is Shard.
	// Every process builds the same cluster (names, pods, workload); with PortBase and one CA bundle (CA) the
	// processes together serve what one would, each within its own open-file limit and CPU share. Shards 0 or 1
	// serves every node.
	Shard, Shards int
	// CA is a bundle from another Sim's CABundlePEM: this sim signs with that authority, so one CA file trusts
	// every shard. Empty: a new authority.
	CA []byte
}

// Fixed per-node usage outside any pod (system daemons, kernel): part of the node's truth, as on a real node
// where node usage is always more than the sum of its pods.
const (
	NodeOverheadNanoCores   = 100_000_000 // 0.1 core
	NodeOverheadMemoryBytes = 256 << 20   // 256 MiB
)

func withDefaults(cfg Config) Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.Nodes, 1)
	def(&cfg.PodsPerNode, 2)
	def(&cfg.ContainersPerPod, 2)
	def(&cfg.Namespaces, 1)
	if cfg.NodePrefix == "" {
		cfg.NodePrefix = "sim-node-"
	}
	if cfg.PodPrefix == "" {
		cfg.PodPrefix = "sim-pod-"
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	return cfg
}

// DefaultUsage is the deterministic default workload of container c of global pod g: CPU in nanocores
// (10m plus 5m steps, cycling over 17 values) and working set in bytes ((g mod 500 + 10) MiB plus 4 KiB per
// container). The cycles keep every node within its capacity at any cluster size (110 pods of 2 containers take
// at most 110 GiB of the node's 128), as a real node's pods are: the server drops a node's value above it.
func DefaultUsage(g, c, containersPerPod int) (nanoCores, memoryBytes uint64) {
	k := uint64((g*containersPerPod + c) % 17)
	return 10_000_000 + k*5_000_000, uint64(g%500+10)<<20 + uint64(c)*4096
}

// DefaultSwap is the default swap usage in bytes of container c of global pod g: the app container of every third
// pod swaps (g mod 100 + 1) x 1.5 MiB (not whole mebibytes, so rounding shows; the cycle keeps 110 pods within
// the node's 8 GiB of swap), every other container swaps nothing.
func DefaultSwap(g, c int) uint64 {
	if c != 0 || g%3 != 1 {
		return 0
	}
	return uint64(g%100+1) * (3 << 19)
}

// ContainerName names container c of a registered pod: "app", "sidecar", then "sidecar-2", "sidecar-3", ...
func ContainerName(c int) string {
	switch c {
	case 0:
		return "app"
	case 1:
		return "sidecar"
	}
	return fmt.Sprintf("sidecar-%d", c)
}

// timeNow is the sim's clock; tests pin it to compare two renderings of the same instant.
var timeNow = time.Now

func key(namespace, name string) string { return namespace + "/" + name }
