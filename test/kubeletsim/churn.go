package kubeletsim

import (
	"fmt"
	"maps"
	"time"
)

// Churn: pods deleted and created under new names, containers restarting, nodes leaving and joining (issue 29).
// Every change is a Step, so that processes sharing one cluster (Config.Shards) make the same changes: one of
// them plans a Step (Planner), applies it and hands it to the others, which Apply it too. Truth follows every
// Step, so values stay checkable while the cluster moves.

// Op is what a Step does.
type Op string

const (
	// OpRemove stops serving a pod (its kubelet stops reporting it; a deleted pod's containers are gone).
	OpRemove Op = "remove"
	// OpAdd serves a new pod on a node: its containers start at Step.At, with the default workload's usage of
	// global index Step.Index.
	OpAdd Op = "add"
	// OpRestart restarts a container: a new start time (Step.At) and a counter starting again from zero, at the
	// same rate and working set (Truth does not change).
	OpRestart Op = "restart"
	// OpNodeDown takes a node out of the cluster: it stops serving its pods (Truth loses them and the node) and
	// its kubelet aborts every request, as a node shut down refuses connections.
	OpNodeDown Op = "node-down"
	// OpNodeUp brings a node that left back, booted at Step.At, with no pods.
	OpNodeUp Op = "node-up"
)

// Step is one change of the simulated cluster; it marshals to JSON (one line per Step between processes).
type Step struct {
	Op        Op                `json:"op"`
	Namespace string            `json:"namespace,omitempty"`
	Pod       string            `json:"pod,omitempty"`
	Node      string            `json:"node,omitempty"`
	Container string            `json:"container,omitempty"`
	UID       string            `json:"uid,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Index is an added pod's global index: its usage is DefaultUsage(Index, c, ...) and DefaultSwap(Index, c).
	Index int       `json:"index,omitempty"`
	At    time.Time `json:"at"`
}

// Apply makes st's change. A Step that does not fit the cluster (an unknown pod or node, a name taken) is an
// error and changes nothing: processes that applied different Steps would serve different clusters.
func (s *Sim) Apply(st Step) error {
	switch st.Op {
	case OpRemove:
		if !s.removePod(st.Namespace, st.Pod) {
			return fmt.Errorf("kubeletsim: remove: unknown pod %s/%s", st.Namespace, st.Pod)
		}
		return nil
	case OpAdd:
		return s.applyAdd(st)
	case OpRestart:
		return s.applyRestart(st)
	case OpNodeDown:
		return s.applyNodeDown(st)
	case OpNodeUp:
		return s.applyNodeUp(st)
	}
	return fmt.Errorf("kubeletsim: unknown step %q", st.Op)
}

func (s *Sim) upNode(name string) (*node, error) {
	n, ok := s.byName[name]
	if !ok {
		return nil, fmt.Errorf("kubeletsim: unknown node %q", name)
	}
	if n.down.Load() {
		return nil, fmt.Errorf("kubeletsim: node %s has left the cluster", name)
	}
	return n, nil
}

func (s *Sim) applyAdd(st Step) error {
	n, err := s.upNode(st.Node)
	if err != nil {
		return err
	}
	if st.Namespace == "" || st.Pod == "" || len(st.UID) < 36 || st.Index < 0 {
		return fmt.Errorf("kubeletsim: add: incomplete step %+v", st)
	}
	now := timeNow().UnixNano()
	p := &pod{namespace: st.Namespace, name: st.Pod, uid: st.UID, node: n, start: st.At,
		labels: maps.Clone(st.Labels), changed: st.At}
	for c := range s.cfg.ContainersPerPod {
		cpu, mem := DefaultUsage(st.Index, c, s.cfg.ContainersPerPod)
		ctr := newContainer(ContainerName(c), "registry.k8s.io/pause:3.10", containerID(st.UID, c), st.At, now,
			cpu, mem)
		ctr.swap = DefaultSwap(st.Index, c)
		p.containers = append(p.containers, ctr)
	}
	s.mu.Lock()
	if _, dup := s.pods[key(p.namespace, p.name)]; dup {
		s.mu.Unlock()
		return fmt.Errorf("kubeletsim: add: pod %s/%s is already simulated", p.namespace, p.name)
	}
	s.putLocked(p)
	s.mu.Unlock()
	n.addPod(p, now)
	return nil
}

func (s *Sim) applyRestart(st Step) error {
	p, err := s.lookup(st.Namespace, st.Pod)
	if err != nil {
		return err
	}
	n := p.node
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range p.containers {
		if c.name == st.Container {
			// 1 ns, not 0: a counter of 0 is what a broken kubelet reports.
			c.cpu = counter{base: 1, since: st.At.UnixNano(), rate: c.cpu.rate}
			c.start = st.At
			c.restarts++
			p.changed = st.At
			return nil
		}
	}
	return fmt.Errorf("kubeletsim: restart: pod %s/%s has no container %q", st.Namespace, st.Pod, st.Container)
}

func (s *Sim) applyNodeDown(st Step) error {
	n, err := s.upNode(st.Node)
	if err != nil {
		return err
	}
	n.down.Store(true)
	n.mu.Lock()
	gone := n.pods
	n.pods, n.sortedValid = nil, false
	n.cpu.set(timeNow().UnixNano(), NodeOverheadNanoCores)
	n.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range gone {
		if s.pods[key(p.namespace, p.name)] == p {
			s.dropLocked(key(p.namespace, p.name))
		}
	}
	return nil
}

func (s *Sim) applyNodeUp(st Step) error {
	n, ok := s.byName[st.Node]
	if !ok {
		return fmt.Errorf("kubeletsim: unknown node %q", st.Node)
	}
	if !n.down.Load() {
		return fmt.Errorf("kubeletsim: node %s has not left the cluster", st.Node)
	}
	n.mu.Lock()
	n.boot = st.At
	// A new boot: the node's counter starts again (1 ns, as a counter of 0 is broken).
	n.cpu = counter{base: 1, since: st.At.UnixNano(), rate: NodeOverheadNanoCores}
	n.mu.Unlock()
	n.down.Store(false)
	return nil
}

// Down says whether a node has left the cluster (OpNodeDown) and not come back.
func (s *Sim) Down(node string) bool {
	n, ok := s.byName[node]
	return ok && n.down.Load()
}
