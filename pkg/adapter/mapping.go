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
	partial   int // CPU without memory or memory without CPU
}

type containerKey struct{ namespace, pod, container string }

// usage collects the CPU and memory results of one object.
type usage struct {
	cpu, mem       float64
	hasCPU, hasMem bool
	ts             model.Time
}

func (u *usage) set(isCPU bool, v float64, ts model.Time, sk *skipped) {
	has, val := &u.hasMem, &u.mem
	if isCPU {
		has, val = &u.hasCPU, &u.cpu
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

// mapContainers joins the container CPU and memory vectors into samples, sorted by namespace, pod and container so
// that the same results always give the same batch.
func mapContainers(cpu, mem model.Vector, qc, qm *query, sk *skipped) []storage.ContainerSample {
	byKey := make(map[containerKey]*usage, len(cpu))
	key := func(q *query) func(model.Metric) (containerKey, bool) {
		return func(m model.Metric) (containerKey, bool) {
			k := containerKey{string(m[model.LabelName(q.namespace)]), string(m[model.LabelName(q.pod)]),
				string(m[model.LabelName(q.container)])}
			return k, k.namespace != "" && k.pod != "" && k.container != ""
		}
	}
	collect(cpu, key(qc), byKey, true, sk)
	collect(mem, key(qm), byKey, false, sk)
	out := make([]storage.ContainerSample, 0, len(byKey))
	for k, u := range byKey {
		if !u.hasCPU || !u.hasMem {
			sk.partial++
			continue
		}
		out = append(out, storage.ContainerSample{Namespace: k.namespace, Pod: k.pod, Container: k.container,
			Sample: storage.Sample{Timestamp: u.ts.Time().UTC(), CPU: u.cpu, Memory: u.mem}})
	}
	slices.SortFunc(out, func(a, b storage.ContainerSample) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Container, b.Container))
	})
	return out
}

// mapNodes joins the node CPU and memory vectors into samples, sorted by node.
func mapNodes(cpu, mem model.Vector, qc, qm *query, sk *skipped) []storage.NodeSample {
	byNode := make(map[string]*usage, len(cpu))
	key := func(q *query) func(model.Metric) (string, bool) {
		return func(m model.Metric) (string, bool) {
			name := string(m[model.LabelName(q.node)])
			return name, name != ""
		}
	}
	collect(cpu, key(qc), byNode, true, sk)
	collect(mem, key(qm), byNode, false, sk)
	out := make([]storage.NodeSample, 0, len(byNode))
	for name, u := range byNode {
		if !u.hasCPU || !u.hasMem {
			sk.partial++
			continue
		}
		out = append(out, storage.NodeSample{Node: name,
			Sample: storage.Sample{Timestamp: u.ts.Time().UTC(), CPU: u.cpu, Memory: u.mem}})
	}
	slices.SortFunc(out, func(a, b storage.NodeSample) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// collect adds one vector's values to the usage of the objects its series name; a series whose naming labels are
// missing is counted as unmapped.
func collect[K comparable](vec model.Vector, key func(model.Metric) (K, bool), into map[K]*usage, isCPU bool, sk *skipped) {
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
		u.set(isCPU, float64(s.Value), s.Timestamp, sk)
	}
}

// evalTime is the instant every query of a poll is evaluated at, so CPU and memory describe the same moment.
func evalTime(now time.Time) time.Time { return now.Truncate(time.Millisecond) }
