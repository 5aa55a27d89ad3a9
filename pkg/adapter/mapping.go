package adapter

import (
	"cmp"
	"slices"
	"time"

	"github.com/prometheus/common/model"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// skipped counts result series that could not be served, by reason, for /metrics and the log.
type skipped struct {
	unmapped  int // a naming label is missing or empty
	duplicate int // two series name the same object (the larger value is kept)
	partial   int // CPU without memory or memory without CPU (or swap without either)
}

// resource says which value of a usage a result vector holds.
type resource uint8

const (
	resourceCPU resource = iota
	resourceMemory
	resourceSwap
)

type containerKey struct{ namespace, pod, container string }

// usage collects the CPU, memory and swap results of one object.
type usage struct {
	cpu, mem, swap          float64
	hasCPU, hasMem, hasSwap bool
	ts                      model.Time
}

func (u *usage) set(r resource, v float64, ts model.Time, sk *skipped) {
	has, val := &u.hasMem, &u.mem
	switch r {
	case resourceCPU:
		has, val = &u.hasCPU, &u.cpu
	case resourceSwap:
		has, val = &u.hasSwap, &u.swap
	}
	if *has {
		sk.duplicate++
		if !(v > *val) { // NaN never wins
			return
		}
	}
	*has, *val = true, v
	u.ts = max(u.ts, ts)
}

// mapContainers joins the container CPU, memory and swap vectors into samples, sorted by namespace, pod and
// container so that the same results always give the same batch. qs is nil without a swap rule.
func mapContainers(cpu, mem, swap model.Vector, qc, qm, qs *query, sk *skipped) []storage.ContainerSample {
	byKey := make(map[containerKey]*usage, len(cpu))
	key := func(q *query) func(model.Metric) (containerKey, bool) {
		return func(m model.Metric) (containerKey, bool) {
			k := containerKey{string(m[model.LabelName(q.namespace)]), string(m[model.LabelName(q.pod)]),
				string(m[model.LabelName(q.container)])}
			return k, k.namespace != "" && k.pod != "" && k.container != ""
		}
	}
	collect(cpu, key(qc), byKey, resourceCPU, sk)
	collect(mem, key(qm), byKey, resourceMemory, sk)
	if qs != nil {
		collect(swap, key(qs), byKey, resourceSwap, sk)
	}
	out := make([]storage.ContainerSample, 0, len(byKey))
	for k, u := range byKey {
		if !u.hasCPU || !u.hasMem {
			sk.partial++
			continue
		}
		out = append(out, storage.ContainerSample{Namespace: k.namespace, Pod: k.pod, Container: k.container,
			Sample: u.sample()})
	}
	slices.SortFunc(out, func(a, b storage.ContainerSample) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Container, b.Container))
	})
	return out
}

// mapNodes joins the node CPU, memory and swap vectors into samples, sorted by node. qs is nil without a swap rule.
func mapNodes(cpu, mem, swap model.Vector, qc, qm, qs *query, sk *skipped) []storage.NodeSample {
	byNode := make(map[string]*usage, len(cpu))
	key := func(q *query) func(model.Metric) (string, bool) {
		return func(m model.Metric) (string, bool) {
			name := string(m[model.LabelName(q.node)])
			return name, name != ""
		}
	}
	collect(cpu, key(qc), byNode, resourceCPU, sk)
	collect(mem, key(qm), byNode, resourceMemory, sk)
	if qs != nil {
		collect(swap, key(qs), byNode, resourceSwap, sk)
	}
	out := make([]storage.NodeSample, 0, len(byNode))
	for name, u := range byNode {
		if !u.hasCPU || !u.hasMem {
			sk.partial++
			continue
		}
		out = append(out, storage.NodeSample{Node: name, Sample: u.sample()})
	}
	slices.SortFunc(out, func(a, b storage.NodeSample) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

func (u *usage) sample() storage.Sample {
	return storage.Sample{Timestamp: u.ts.Time().UTC(), CPU: u.cpu, Memory: u.mem, Swap: u.swap, HasSwap: u.hasSwap}
}

// collect adds one vector's values to the usage of the objects its series name; a series whose naming labels are
// missing is counted as unmapped.
func collect[K comparable](vec model.Vector, key func(model.Metric) (K, bool), into map[K]*usage, r resource, sk *skipped) {
	for _, s := range vec {
		k, ok := key(s.Metric)
		if !ok {
			sk.unmapped++
			continue
		}
		u := into[k]
		if u == nil {
			u = &usage{}
			into[k] = u
		}
		u.set(r, float64(s.Value), s.Timestamp, sk)
	}
}

// evalTime is the instant every query of a poll is evaluated at, so CPU and memory describe the same moment.
func evalTime(now time.Time) time.Time { return now.Truncate(time.Millisecond) }
