package storage

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// served is everything a snapshot serves, for comparing two of them.
func served(v *view) (nodes map[string]NodePoint, pods map[string]PodPoint) {
	nodes, pods = map[string]NodePoint{}, map[string]PodPoint{}
	v.Each(func(name string) {
		if p, ok := v.Node(name); ok {
			nodes[name] = p
		}
	}, func(ns, name string) {
		if p, ok := v.Pod(ns, name); ok {
			pods[ns+"/"+name] = p
		}
	})
	return nodes, pods
}

// contents is everything a snapshot holds, stale or not, deep-copied.
func contents(v *view) (nodes map[string]NodePoint, pods map[string]PodPoint) {
	nodes, pods = map[string]NodePoint{}, map[string]PodPoint{}
	for name, e := range v.nodes {
		nodes[name] = e.NodePoint
	}
	for k, i := range v.index.all() {
		if e, r, ok := v.pods.entry(i); ok && e.n > 0 {
			pods[k.namespace+"/"+k.name] = PodPoint{Timestamp: time.Unix(0, e.ts), Window: e.window,
				Names: slices.Clone(r.names[e.from : e.from+e.n]), Usages: slices.Clone(r.usages[e.from : e.from+e.n]), UID: e.uid}
		}
	}
	return nodes, pods
}

// TestInterimBuildEqualsFullBuild: an interim snapshot, built from the published one and what changed since, serves
// exactly what a full build at that moment serves, whatever mix of appends (new and repeated samples, containers
// coming and going, restarts, invalid values), pods bound, rebound and deleted, nodes deleted and publications came
// before; and every retained snapshot still serves what it served when it was published (snapshots share their
// containers' names). Each seed is one random history.
func TestInterimBuildEqualsFullBuild(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			batches := cluster(6, 5, 3)
			c := &clock{now: t0}
			s := New(Options{Now: c.Now, AfterFunc: c.afterFunc})
			bindEvery(s, batches)
			cy := s.BeginCycle()
			interims := 0
			type servedBy struct {
				nodes map[string]NodePoint
				pods  map[string]PodPoint
			}
			published := map[uint64]servedBy{}
			// record notes what the newest snapshot holds and checks that each retained one holds what it did when
			// published.
			record := func(step int) {
				v := s.view.Load()
				nodes, pods := contents(v)
				published[v.generation] = servedBy{nodes, pods}
				for _, r := range *s.recent.Load() {
					want, ok := published[r.generation]
					if !ok {
						continue
					}
					if nodes, pods := contents(r); !reflect.DeepEqual(nodes, want.nodes) || !reflect.DeepEqual(pods, want.pods) {
						t.Fatalf("step %d: retained snapshot %d now holds\n%v\n%v\nwhere it held\n%v\n%v",
							step, r.generation, nodes, pods, want.nodes, want.pods)
					}
				}
			}
			// check checks an interim publication: it serves what a full build serves.
			check := func(step int) {
				interims++
				record(step)
				s.mu.Lock()
				full := s.buildView()
				s.mu.Unlock()
				gotNodes, gotPods := served(s.view.Load())
				wantNodes, wantPods := served(full)
				if !reflect.DeepEqual(gotNodes, wantNodes) || !reflect.DeepEqual(gotPods, wantPods) {
					t.Fatalf("step %d: the interim snapshot serves\n%v\n%v\nwhere a full build serves\n%v\n%v",
						step, gotNodes, gotPods, wantNodes, wantPods)
				}
			}
			// checked does what changes storage, and checks the interim publication it made, if any: a deletion is
			// published when it comes, or by a timer once MinPublishInterval has passed (c.set).
			checked := func(step int, do func()) {
				before := s.Latest().Generation()
				do()
				if s.Latest().Generation() != before {
					check(step)
				}
			}
			for step := range 400 {
				checked(step, func() { c.set(c.now.Add(time.Duration(200+rng.IntN(800)) * time.Millisecond)) })
				switch op := rng.IntN(20); {
				case op < 10: // a node's batch lands, with some of its values changed
					b := batches[rng.IntN(len(batches))]
					b.Nodes[0].Timestamp, b.Nodes[0].CPU = c.now, b.Nodes[0].CPU+rng.Float64()
					var cs []ContainerSample
					for _, smp := range b.Containers {
						switch rng.IntN(12) {
						case 0: // this container is not reported this time
							continue
						case 1: // restarted
							smp.StartTime = c.now.Add(-time.Second)
						case 2: // invalid
							smp.CPU = -1
						}
						smp.Timestamp, smp.CPU = c.now, smp.CPU+rng.Float64()
						cs = append(cs, smp)
					}
					b.Containers = cs
					cy.Append(&b)
				case op < 12: // a pod deleted, or bound again (elsewhere, or where it was)
					b := batches[rng.IntN(len(batches))]
					smp := b.Containers[rng.IntN(len(b.Containers))]
					switch rng.IntN(4) {
					case 0:
						checked(step, func() { s.PodDeleted(smp.Namespace, smp.Pod) })
					case 3: // recreated in its slot, its containers of other names started since its node's last batch
						// (servable after one sample, so an interim build may write them over the old pod's run)
						checked(step, func() { s.PodDeleted(smp.Namespace, smp.Pod) })
						s.PodBound(smp.Namespace, smp.Pod, b.Key)
						for i := range b.Containers {
							if cs := &b.Containers[i]; cs.Pod == smp.Pod && cs.Namespace == smp.Namespace {
								cs.Container, cs.StartTime = fmt.Sprintf("r%d-%s", step, cs.Container), c.now
							}
						}
						// and its node's next batch lands before the next publication
						c.now = c.now.Add(time.Millisecond)
						b.Nodes[0].Timestamp = c.now
						cs := slices.Clone(b.Containers)
						for i := range cs {
							cs[i].Timestamp, cs[i].CPU = c.now, cs[i].CPU+rng.Float64()
						}
						b.Containers = cs
						cy.Append(&b)
					case 1:
						s.PodBound(smp.Namespace, smp.Pod, batches[rng.IntN(len(batches))].Key)
					default: // where it was, its object told: learnt, the same, or another under the name
						s.BindPod(PodObject{Namespace: smp.Namespace, Name: smp.Pod, Node: b.Key, UID: uint64(rng.IntN(3))})
					}
				case op == 12:
					checked(step, func() { s.NodeDeleted(batches[rng.IntN(len(batches))].Key) })
				case op < 17:
					checked(step, cy.Publish)
				default:
					cy.Commit(Outcome{Success: true})
					record(step)
					cy = s.BeginCycle()
				}
			}
			if interims < 20 {
				t.Fatalf("only %d interim publications: the history tests little", interims)
			}
		})
	}
}
