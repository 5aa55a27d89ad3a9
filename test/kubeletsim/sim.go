// Package kubeletsim simulates many kubelets in one process for the end-to-end tests, the demo and the scale
// benchmark. Each simulated node listens on its own loopback port with TLS and serves /metrics/resource rendered
// by the kubelet's own resource-metrics collector (so the bytes are a real kubelet's), /metrics/cadvisor rendered
// by cAdvisor's own Prometheus collector, and /healthz. Workloads are deterministic and can be changed at run
// time; Truth says what a correct metrics pipeline must answer. Register writes the matching Node and Pod objects
// into an API server.
package kubeletsim

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes the simulated cluster. Zero values take the defaults documented on each field.
type Config struct {
	Nodes, PodsPerNode, ContainersPerPod, Namespaces int // defaults 1, 2, 2, 1 when 0
	// NodePrefix names nodes NodePrefix + index; default "sim-node-".
	NodePrefix string
	// PodPrefix names pod j of node i fmt.Sprintf("%s%d-%d", PodPrefix, i, j); default "sim-pod-". Its
	// namespace is "sim-ns-<k>" with k = global pod index mod Namespaces.
	PodPrefix string
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

// PodRef names a simulated pod and its containers.
type PodRef struct {
	Namespace, Name, Node string
	Containers            []string
}

// Sim is a set of simulated kubelets. Its methods are safe for concurrent use.
type Sim struct {
	cfg   Config
	epoch time.Time // sim creation; containers started 2h before it

	mu     sync.RWMutex // guards pods; node contents are guarded by each node's own lock
	pods   map[string]*pod
	nodes  []*node
	byName map[string]*node

	ca      *authority
	started atomic.Bool
	adopted atomic.Int64 // UIDs for adopted pods that come without one (fakes)
	stopped bool         // guarded by mu
	server  *serverState // guarded by mu
}

// node is one simulated kubelet. Its lock is the only one taken on the request path, so scrapes of different
// nodes never contend.
type node struct {
	name  string
	index int
	boot  time.Time
	fresh bool // Config.FreshStats

	mu   sync.Mutex
	pods []*pod // serving order; the collectors' registries sort the output anyway
	// The fast renderer's sample order, rebuilt when the pod set changes.
	sortedValid bool
	sortedCs    []podContainer
	sortedPods  []*pod
	cpu         counter // node total: overhead plus every container, integrated on its own so it never goes backwards

	port         int // guarded by Sim.mu
	fault        atomic.Pointer[Fault]
	foreign      atomic.Pointer[foreignReport] // another node's pods this one also reports (SetForeign)
	instances    atomic.Pointer[instanceFault] // a container's old instance reported in turn (AlternateInstances)
	farStart     atomic.Pointer[farStart]      // a container's start time past int64 nanoseconds (FarFutureStart)
	resourceOnce sync.Once
	resourceH    http.Handler
	cadvisorOnce sync.Once
	cadvisorH    http.Handler
	certOnce     sync.Once
	cert         *certResult
}

type pod struct {
	namespace, name, uid string
	node                 *node
	start                time.Time
	labels               map[string]string
	containers           []*container
	detached             bool // reported by its node, no longer the sim's (DetachPod); guarded by node.mu
}

type container struct {
	name, image, id string
	start           time.Time
	cpu             counter
	memory          uint64
	swap            uint64 // bytes; every simulated container reports swap, most of them 0
}

// New builds the simulated cluster with its default workload; nothing listens until Start.
func New(cfg Config) (*Sim, error) {
	cfg = withDefaults(cfg)
	if cfg.Nodes < 0 || cfg.PodsPerNode < 0 || cfg.ContainersPerPod < 0 || cfg.Namespaces < 0 {
		return nil, fmt.Errorf("kubeletsim: negative size in config %+v", cfg)
	}
	if net.ParseIP(cfg.Host) == nil {
		return nil, fmt.Errorf("kubeletsim: Host %q is not an IP address", cfg.Host)
	}
	if cfg.Shards > 1 && (cfg.Shard < 0 || cfg.Shard >= cfg.Shards) {
		return nil, fmt.Errorf("kubeletsim: shard %d is not in [0, %d)", cfg.Shard, cfg.Shards)
	}
	if cfg.PortBase < 0 || cfg.PortBase+cfg.Nodes > 65536 {
		return nil, fmt.Errorf("kubeletsim: ports %d to %d are not all valid", cfg.PortBase, cfg.PortBase+cfg.Nodes-1)
	}
	ca, err := loadOrNewAuthority(cfg.CA)
	if err != nil {
		return nil, fmt.Errorf("kubeletsim: creating CA: %w", err)
	}
	s := &Sim{
		cfg:    cfg,
		epoch:  timeNow(),
		pods:   make(map[string]*pod, cfg.Nodes*cfg.PodsPerNode),
		byName: make(map[string]*node, cfg.Nodes),
		ca:     ca,
	}
	now := s.epoch.UnixNano()
	var appLabels [3]map[string]string
	for a := range appLabels {
		appLabels[a] = map[string]string{"app": fmt.Sprintf("app-%d", a)}
		for k, v := range cfg.Labels {
			appLabels[a][k] = v
		}
	}
	start := s.epoch.Truncate(time.Second).Add(-2 * time.Hour) // whole seconds, like the fixture
	for i := range cfg.Nodes {
		n := s.newNode(i)
		for j := range cfg.PodsPerNode {
			g := i*cfg.PodsPerNode + j // global pod index
			p := &pod{
				namespace: fmt.Sprintf("sim-ns-%d", g%cfg.Namespaces),
				name:      fmt.Sprintf("%s%d-%d", cfg.PodPrefix, i, j),
				uid:       fmt.Sprintf("00000000-0000-4000-8000-%012d", g),
				node:      n,
				start:     start,
				labels:    appLabels[g%3], // shared and read-only: one map per app, not per pod
			}
			if cfg.WorkloadPods > 0 {
				p.labels = maps.Clone(p.labels)
				p.labels["workload"] = workloadValue(g / cfg.Namespaces / cfg.WorkloadPods)
			}
			for c := range cfg.ContainersPerPod {
				cpu, mem := DefaultUsage(g, c, cfg.ContainersPerPod)
				ctr := newContainer(ContainerName(c), "registry.k8s.io/pause:3.10",
					containerID(p.uid, c), start.Add(time.Duration(c)*time.Second), now, cpu, mem)
				ctr.swap = DefaultSwap(g, c)
				p.containers = append(p.containers, ctr)
			}
			n.addPod(p, now)
			s.pods[key(p.namespace, p.name)] = p
		}
	}
	return s, nil
}

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

func (s *Sim) newNode(i int) *node {
	n := &node{name: fmt.Sprintf("%s%d", s.cfg.NodePrefix, i), index: i, boot: s.epoch.Add(-2 * time.Hour),
		fresh: s.cfg.FastResource && s.cfg.FreshStats}
	// The node's counter starts as if the overhead had run since the containers started, so it is never zero.
	if s.cfg.PortBase > 0 {
		n.port = s.cfg.PortBase + i
	}
	n.cpu = counter{base: NodeOverheadNanoCores * uint64(2*time.Hour/time.Second), since: s.epoch.UnixNano(),
		rate: NodeOverheadNanoCores}
	s.nodes = append(s.nodes, n)
	s.byName[n.name] = n
	return n
}

func newContainer(name, image, id string, start time.Time, now int64, nanoCores, mem uint64) *container {
	c := &container{name: name, image: image, id: id, start: start, memory: mem}
	// As if it had run at this rate since it started: a cumulative counter well above zero.
	c.cpu = counter{since: now, rate: nanoCores}
	c.cpu.base = max(1, mulDiv(nanoCores, uint64(max(0, now-start.UnixNano())), uint64(time.Second))) // never 0: broken
	return c
}

// containerID is a deterministic 64-hex-digit ID, shaped like containerd's, for cAdvisor's cgroup paths.
func containerID(uid string, c int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", uid, c))
	return hex.EncodeToString(sum[:])
}

// timeNow is the sim's clock; tests pin it to compare two renderings of the same instant.
var timeNow = time.Now

func key(namespace, name string) string { return namespace + "/" + name }

// addPod starts serving p on n; the node's rate grows by the pod's, its counter stays continuous.
func (n *node) addPod(p *pod, now int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var sum uint64
	for _, c := range p.containers {
		sum += c.cpu.rate
	}
	n.cpu.set(now, n.cpu.rate+sum)
	n.pods = append(n.pods, p)
	n.sortedValid = false
}

// Nodes lists the node names in index order.
func (s *Sim) Nodes() []string {
	out := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n.name
	}
	return out
}

// Pods lists every pod being served, sorted by namespace and name.
func (s *Sim) Pods() []PodRef {
	s.mu.RLock()
	out := make([]PodRef, 0, len(s.pods))
	for _, p := range s.pods {
		ref := PodRef{Namespace: p.namespace, Name: p.name, Node: p.node.name}
		for _, c := range p.containers {
			ref.Containers = append(ref.Containers, c.name)
		}
		out = append(out, ref)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b PodRef) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Namespaces lists the namespaces of the default workload (the ones Register creates).
func (s *Sim) Namespaces() []string {
	out := make([]string, s.cfg.Namespaces)
	for k := range out {
		out[k] = fmt.Sprintf("sim-ns-%d", k)
	}
	return out
}

// serves says whether this process serves node n (see Config.Shards).
func (s *Sim) serves(n *node) bool { return s.cfg.Shards <= 1 || n.index%s.cfg.Shards == s.cfg.Shard }

// Host is the address every node listens on.
func (s *Sim) Host() string { return s.cfg.Host }
