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
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodRef names a simulated pod and its containers.
type PodRef struct {
	Namespace, Name, Node string
	Containers            []string
	Labels                map[string]string // of the pods a Planner removes (NodeDown); nil from Pods
}

// Sim is a set of simulated kubelets. Its methods are safe for concurrent use.
type Sim struct {
	cfg   Config
	epoch time.Time // sim creation; containers started 2h before it

	mu     sync.RWMutex // guards pods and keys; node contents are guarded by each node's own lock
	pods   map[string]*pod
	keys   []string                           // the keys of pods, in any order: a random pod is keys[rand] (see Planner)
	owners map[string][]metav1.OwnerReference // by "namespace/workload" (RegisterWorkloads)
	nodes  []*node
	byName map[string]*node
	// mostPods is the most pods New placed on one node (podCapacity).
	mostPods int

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

	port         int         // guarded by Sim.mu
	down         atomic.Bool // left the cluster (see OpNodeDown): its kubelet aborts every request
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
	slot                 int  // its index in Sim.keys; guarded by Sim.mu
	// changed is when the pod was added by a Step or a container of it last restarted (zero for the default
	// workload's pods): a reader compares its values with Truth only a few cycles after it. Guarded by node.mu.
	changed time.Time
}

type container struct {
	name, image, id string
	start           time.Time
	cpu             counter
	memory          uint64
	swap            uint64 // bytes; every simulated container reports swap, most of them 0
	restarts        int32  // how often it restarted (OpRestart): the Pod's restartCount
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
		s.newNode(i)
	}
	place := s.placement()
	for i := range cfg.Nodes {
		for j := range cfg.PodsPerNode {
			g := i*cfg.PodsPerNode + j // global pod index
			n := place(g)
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
				p.labels[workloadLabel] = workloadValue(g / cfg.Namespaces / cfg.WorkloadPods)
			}
			for c := range cfg.ContainersPerPod {
				cpu, mem := DefaultUsage(g, c, cfg.ContainersPerPod)
				ctr := newContainer(ContainerName(c), "registry.k8s.io/pause:3.10",
					containerID(p.uid, c), start.Add(time.Duration(c)*time.Second), now, cpu, mem)
				ctr.swap = DefaultSwap(g, c)
				p.containers = append(p.containers, ctr)
			}
			n.addPod(p, now)
			s.putLocked(p)
		}
	}
	for _, n := range s.nodes {
		s.mostPods = max(s.mostPods, len(n.pods))
	}
	return s, nil
}

// podCapacity is the pods every node publishes room for: the kubelet's default 110, or more when the cluster
// places more on a node (PodsPerNode, or Spread's fullest node).
func (s *Sim) podCapacity() int { return max(110, s.cfg.PodsPerNode, s.mostPods) }

// placement returns the node of each global pod index: PodsPerNode on each node in turn, or with Spread a node
// drawn at random for each, in index order, so every shard draws the same.
func (s *Sim) placement() func(g int) *node {
	if !s.cfg.Spread {
		return func(g int) *node { return s.nodes[g/s.cfg.PodsPerNode] }
	}
	rng := rand.New(rand.NewPCG(s.cfg.SpreadSeed, s.cfg.SpreadSeed^0x9e3779b97f4a7c15))
	return func(int) *node { return s.nodes[rng.IntN(len(s.nodes))] }
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

// putLocked makes p one of the sim's pods; needs s.mu.
func (s *Sim) putLocked(p *pod) {
	p.slot = len(s.keys)
	s.keys = append(s.keys, key(p.namespace, p.name))
	s.pods[s.keys[p.slot]] = p
}

// dropLocked forgets the pod keyed k, if there is one; needs s.mu.
func (s *Sim) dropLocked(k string) (*pod, bool) {
	p, ok := s.pods[k]
	if !ok {
		return nil, false
	}
	delete(s.pods, k)
	last := len(s.keys) - 1
	if p.slot != last {
		moved := s.keys[last]
		s.keys[p.slot] = moved
		s.pods[moved].slot = p.slot
	}
	s.keys = s.keys[:last]
	return p, true
}
