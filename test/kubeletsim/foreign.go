package kubeletsim

import "fmt"

// foreignReport makes a node also report another node's pods, as the old node of a pod recreated elsewhere under
// its name does while it terminates, or as a forged report would.
type foreignReport struct {
	victim *node
	factor uint64
}

// SetForeign makes node thief also report every pod of node victim, its CPU counters, rates and working sets
// multiplied by factor, on /metrics/resource. Factor 0 stops it. The victim reports its pods as before and Truth
// does not change: a correct pipeline serves the victim's pods at their own node's values, and the thief's own pods
// and node totals are unaffected.
func (s *Sim) SetForeign(thief, victim string, factor uint64) error {
	t, ok := s.byName[thief]
	if !ok {
		return fmt.Errorf("kubeletsim: no node %q", thief)
	}
	if factor == 0 {
		t.foreign.Store(nil)
		return nil
	}
	v, ok := s.byName[victim]
	if !ok || v == t {
		return fmt.Errorf("kubeletsim: node %q cannot report the pods of %q", thief, victim)
	}
	t.foreign.Store(&foreignReport{victim: v, factor: factor})
	return nil
}

// pods copies the victim's pods as the thief reports them at now (unix nanoseconds). The victim's lock is taken
// alone, never with the thief's, so two nodes reporting each other's pods cannot deadlock.
func (f *foreignReport) pods(now int64) []*pod {
	v := f.victim
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]*pod, 0, len(v.pods))
	for _, p := range v.pods {
		q := *p
		q.containers = make([]*container, len(p.containers))
		for i, c := range p.containers {
			cc := *c
			cc.cpu = counter{base: mulDiv(c.cpu.at(now), f.factor, 1), since: now, rate: c.cpu.rate * f.factor}
			cc.memory = c.memory * f.factor
			q.containers[i] = &cc
		}
		out = append(out, &q)
	}
	return out
}
