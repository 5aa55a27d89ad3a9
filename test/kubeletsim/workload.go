package kubeletsim

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"net/http"
	"strconv"
	"time"
)

// counter is a cumulative CPU counter in core-nanoseconds that integrates a piecewise-constant rate over real
// time: value(t) = base + rate*(t-since). Changing the rate folds the elapsed part into base, so the counter is
// continuous across changes, as a cgroup's usage is.
type counter struct {
	base  uint64 // core-nanoseconds at since
	since int64  // unix nanoseconds
	rate  uint64 // nanocores
}

func (c *counter) at(now int64) uint64 {
	if now <= c.since {
		return c.base
	}
	return c.base + mulDiv(c.rate, uint64(now-c.since), uint64(time.Second))
}

func (c *counter) set(now int64, rate uint64) {
	c.base = c.at(now)
	if now > c.since {
		c.since = now
	}
	c.rate = rate
}

// mulDiv is a*b/d without overflowing at the 128-bit product: hours at many cores exceed 64 bits in
// nanocore-nanoseconds.
func mulDiv(a, b, d uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= d {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, d)
	return q
}

// Usage is what a container, pod or node uses right now.
type Usage struct {
	CPUNanoCores uint64 `json:"cpuNanoCores"`
	MemoryBytes  uint64 `json:"memoryBytes"`
	// SwapBytes is the swap usage; every simulated node and container reports one, as a Linux kubelet with swap
	// does (0 when nothing is swapped).
	SwapBytes uint64 `json:"swapBytes"`
}

// Truth is what a correct metrics pipeline must report: nodes by name (overhead included), pods keyed
// "namespace/name", then by container name.
type Truth struct {
	Nodes map[string]Usage            `json:"nodes"`
	Pods  map[string]map[string]Usage `json:"pods"`
	// Changed says, of the pods a Step added or restarted a container of, when it last did: a rate over a
	// window that straddles the change is not yet the new one, so a reader checks values a few cycles later.
	Changed map[string]time.Time `json:"changed,omitempty"`
}

func nanoCores(cores float64) (uint64, error) {
	if math.IsNaN(cores) || math.IsInf(cores, 0) || cores < 0 || cores > 1e6 {
		return 0, fmt.Errorf("kubeletsim: invalid CPU rate %v cores", cores)
	}
	return uint64(math.Round(cores * 1e9)), nil
}

// SetContainer changes one container's CPU rate (cores) and working set (bytes) from now on.
func (s *Sim) SetContainer(namespace, pod, container string, cpuCores float64, memoryBytes uint64) error {
	rate, err := nanoCores(cpuCores)
	if err != nil {
		return err
	}
	p, err := s.lookup(namespace, pod)
	if err != nil {
		return err
	}
	n := p.node
	now := timeNow().UnixNano()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range p.containers {
		if c.name == container {
			n.cpu.set(now, n.cpu.rate-c.cpu.rate+rate)
			c.cpu.set(now, rate)
			c.memory = memoryBytes
			return nil
		}
	}
	return fmt.Errorf("kubeletsim: pod %s/%s has no container %q", namespace, pod, container)
}

// SetSwap changes one container's swap usage (bytes) from now on.
func (s *Sim) SetSwap(namespace, pod, container string, swapBytes uint64) error {
	p, err := s.lookup(namespace, pod)
	if err != nil {
		return err
	}
	n := p.node
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range p.containers {
		if c.name == container {
			c.swap = swapBytes
			return nil
		}
	}
	return fmt.Errorf("kubeletsim: pod %s/%s has no container %q", namespace, pod, container)
}

// SetPod gives every container of a pod the same CPU rate (cores) and working set (bytes).
func (s *Sim) SetPod(namespace, pod string, cpuCores float64, memoryBytes uint64) error {
	rate, err := nanoCores(cpuCores)
	if err != nil {
		return err
	}
	p, err := s.lookup(namespace, pod)
	if err != nil {
		return err
	}
	n := p.node
	now := timeNow().UnixNano()
	n.mu.Lock()
	defer n.mu.Unlock()
	nodeRate := n.cpu.rate
	for _, c := range p.containers {
		nodeRate = nodeRate - c.cpu.rate + rate
		c.cpu.set(now, rate)
		c.memory = memoryBytes
	}
	n.cpu.set(now, nodeRate)
	return nil
}

// RemovePod stops reporting a pod; the node's counter keeps its accumulated value (as a real node's does) and
// only its rate drops. Unknown pods are ignored: the caller may race with its own deletes.
func (s *Sim) RemovePod(namespace, pod string) { s.removePod(namespace, pod) }

// removePod is RemovePod, reporting whether there was such a pod.
func (s *Sim) removePod(namespace, pod string) bool {
	s.mu.Lock()
	p, ok := s.dropLocked(key(namespace, pod))
	s.mu.Unlock()
	if !ok {
		return false
	}
	n := p.node
	now := timeNow().UnixNano()
	n.mu.Lock()
	defer n.mu.Unlock()
	var sum uint64
	for _, c := range p.containers {
		sum += c.cpu.rate
	}
	n.cpu.set(now, n.cpu.rate-sum)
	for i, q := range n.pods {
		if q == p {
			n.pods = append(n.pods[:i], n.pods[i+1:]...)
			n.sortedValid = false
			break
		}
	}
	return true
}

func (s *Sim) lookup(namespace, name string) (*pod, error) {
	s.mu.RLock()
	p, ok := s.pods[key(namespace, name)]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("kubeletsim: unknown pod %s/%s", namespace, name)
	}
	return p, nil
}

// Truth returns the current usage of every node and pod.
func (s *Sim) Truth() Truth {
	t := Truth{Nodes: make(map[string]Usage, len(s.nodes)), Pods: map[string]map[string]Usage{},
		Changed: map[string]time.Time{}}
	for _, n := range s.nodes {
		if n.down.Load() {
			continue
		}
		n.mu.Lock()
		nu := Usage{CPUNanoCores: n.cpu.rate, MemoryBytes: NodeOverheadMemoryBytes}
		for _, p := range n.pods {
			if p.detached {
				continue
			}
			cs := make(map[string]Usage, len(p.containers))
			for _, c := range p.containers {
				cs[c.name] = Usage{CPUNanoCores: c.cpu.rate, MemoryBytes: c.memory, SwapBytes: c.swap}
				nu.MemoryBytes += c.memory
				nu.SwapBytes += c.swap
			}
			t.Pods[key(p.namespace, p.name)] = cs
			if !p.changed.IsZero() {
				t.Changed[key(p.namespace, p.name)] = p.changed
			}
		}
		n.mu.Unlock()
		t.Nodes[n.name] = nu
	}
	return t
}

// TruthHandler serves Truth as JSON.
func (s *Sim) TruthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(s.Truth()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

func workloadValue(k int) string { return "w-" + strconv.Itoa(k) }

// WorkloadSelector is workload i of the cluster cfg describes (i from 0 to Workloads(cfg)-1): its namespace and
// the label selector that matches its cfg.WorkloadPods pods.
func WorkloadSelector(cfg Config, i int) (namespace, selector string) {
	cfg = withDefaults(cfg)
	return fmt.Sprintf("sim-ns-%d", i%cfg.Namespaces), "workload=" + workloadValue(i/cfg.Namespaces)
}

// Workloads is how many workloads of exactly cfg.WorkloadPods pods the cluster cfg describes has (0 without
// WorkloadPods).
func Workloads(cfg Config) int {
	cfg = withDefaults(cfg)
	if cfg.WorkloadPods <= 0 {
		return 0
	}
	perNS := cfg.Nodes * cfg.PodsPerNode / cfg.Namespaces // the fewest pods a namespace has
	return perNS / cfg.WorkloadPods * cfg.Namespaces
}
