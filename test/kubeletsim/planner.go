package kubeletsim

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"time"
)

// Planner chooses churn Steps at random (seeded, so a run can be repeated) from what its sim serves now. It
// applies the removals it plans at once, so no later plan picks a pod on its way out; the caller applies the
// rest when its API objects exist (see Step). Its methods are safe for concurrent use.
type Planner struct {
	s   *Sim
	mu  sync.Mutex
	rng *rand.Rand
	seq int // pods planned so far: the next one's name, UID and index
}

// NewPlanner plans churn of s from seed.
func (s *Sim) NewPlanner(seed uint64) *Planner {
	return &Planner{s: s, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// errEmpty is returned when there is nothing to churn.
var errEmpty = errors.New("kubeletsim: no pod or node left to churn")

// Replace removes a random pod (applied: its kubelet stops reporting it) and plans its successor, as a
// Deployment replaces a pod: the same namespace and labels, a new name and UID, on a random node that is up,
// its containers starting at now. The caller applies add once the new Pod object exists.
func (p *Planner) Replace(now time.Time) (remove, add Step, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gone, err := p.removeRandom()
	if err != nil {
		return Step{}, Step{}, err
	}
	add, err = p.successor(gone, "", now)
	return Step{Op: OpRemove, Namespace: gone.namespace, Pod: gone.name, Node: gone.node.name, At: now,
		Labels: maps.Clone(gone.labels)}, add, err
}

// removeRandom removes a random pod; needs p.mu.
func (p *Planner) removeRandom() (*pod, error) {
	s := p.s
	for range 100 { // another remover may take the pod between the pick and the removal
		s.mu.RLock()
		if len(s.keys) == 0 {
			s.mu.RUnlock()
			return nil, errEmpty
		}
		victim := s.pods[s.keys[p.rng.IntN(len(s.keys))]]
		s.mu.RUnlock()
		if s.removePod(victim.namespace, victim.name) {
			return victim, nil
		}
	}
	return nil, errEmpty
}

// successor plans a new pod like old on a random node that is up other than avoid; needs p.mu.
func (p *Planner) successor(old *pod, avoid string, now time.Time) (Step, error) {
	n, err := p.randomNode(avoid)
	if err != nil {
		return Step{}, err
	}
	p.seq++
	s := p.s
	return Step{Op: OpAdd, Namespace: old.namespace, Node: n.name, Labels: maps.Clone(old.labels), At: now,
		Pod:   fmt.Sprintf("%sr%d", s.cfg.PodPrefix, p.seq),
		UID:   fmt.Sprintf("00000000-0000-4000-a000-%012d", p.seq),
		Index: s.cfg.Nodes*s.cfg.PodsPerNode + p.seq}, nil
}

// randomNode picks a node that is up other than avoid; needs p.mu.
func (p *Planner) randomNode(avoid string) (*node, error) {
	nodes := p.s.nodes
	for range 1000 {
		if len(nodes) == 0 {
			break
		}
		n := nodes[p.rng.IntN(len(nodes))]
		if !n.down.Load() && n.name != avoid {
			return n, nil
		}
	}
	return nil, errEmpty
}

// Restart plans the restart of a random container of a random pod at now (not applied).
func (p *Planner) Restart(now time.Time) (Step, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.keys) == 0 {
		return Step{}, errEmpty
	}
	q := s.pods[s.keys[p.rng.IntN(len(s.keys))]]
	if len(q.containers) == 0 {
		return Step{}, errEmpty
	}
	c := q.containers[p.rng.IntN(len(q.containers))]
	return Step{Op: OpRestart, Namespace: q.namespace, Pod: q.name, Node: q.node.name, Container: c.name, At: now}, nil
}

// NodeDown takes a random node that is up out of the cluster (applied), as a scale-down drains and removes a
// node: gone are the pods it served (their objects are the caller's to delete) and adds plans their successors
// on other nodes that are up, as their controllers would.
func (p *Planner) NodeDown(now time.Time) (down Step, gone []PodRef, adds []Step, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, err := p.randomNode("")
	if err != nil {
		return Step{}, nil, nil, err
	}
	n.mu.Lock()
	pods := append([]*pod(nil), n.pods...)
	n.mu.Unlock()
	down = Step{Op: OpNodeDown, Node: n.name, At: now}
	if err := p.s.Apply(down); err != nil {
		return Step{}, nil, nil, err
	}
	for _, q := range pods {
		gone = append(gone, PodRef{Namespace: q.namespace, Name: q.name, Node: n.name, Labels: maps.Clone(q.labels)})
		add, err := p.successor(q, n.name, now)
		if err != nil {
			return down, gone, adds, err
		}
		adds = append(adds, add)
	}
	return down, gone, adds, nil
}

// NodeUp brings back a random node that left (applied), booted at now; errEmpty when none has.
func (p *Planner) NodeUp(now time.Time) (Step, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var down []*node
	for _, n := range p.s.nodes {
		if n.down.Load() {
			down = append(down, n)
		}
	}
	if len(down) == 0 {
		return Step{}, errEmpty
	}
	st := Step{Op: OpNodeUp, Node: down[p.rng.IntN(len(down))].name, At: now}
	return st, p.s.Apply(st)
}
