package storage

import (
	"fmt"
	"math/rand/v2"
	"reflect"
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

// TestInterimBuildEqualsFullBuild: an interim snapshot, built from the published one and what changed since, serves
// exactly what a full build at that moment serves, whatever mix of appends (new and repeated samples, containers
// coming and going, restarts, invalid values), pods bound, rebound and deleted, nodes deleted and publications came
// before. Each seed is one random history.
func TestInterimBuildEqualsFullBuild(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			batches := cluster(6, 5, 3)
			c := &clock{now: t0}
			s := New(Options{Now: c.Now})
			bindEvery(s, batches)
			cy := s.BeginCycle()
			interims := 0
			for step := range 400 {
				c.now = c.now.Add(time.Duration(200+rng.IntN(800)) * time.Millisecond)
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
					switch rng.IntN(3) {
					case 0:
						s.PodDeleted(smp.Namespace, smp.Pod)
					case 1:
						s.PodBound(smp.Namespace, smp.Pod, batches[rng.IntN(len(batches))].Key)
					default:
						s.PodBound(smp.Namespace, smp.Pod, b.Key)
					}
				case op == 12:
					s.NodeDeleted(batches[rng.IntN(len(batches))].Key)
				case op < 17:
					before := s.Latest().Generation()
					cy.Publish()
					if s.Latest().Generation() == before {
						continue
					}
					interims++
					s.mu.Lock()
					full := s.buildView()
					s.mu.Unlock()
					gotNodes, gotPods := served(s.view.Load())
					wantNodes, wantPods := served(full)
					if !reflect.DeepEqual(gotNodes, wantNodes) || !reflect.DeepEqual(gotPods, wantPods) {
						t.Fatalf("step %d: the interim snapshot serves\n%v\n%v\nwhere a full build serves\n%v\n%v",
							step, gotNodes, gotPods, wantNodes, wantPods)
					}
				default:
					cy.Commit(Outcome{Success: true})
					cy = s.BeginCycle()
				}
			}
			if interims < 20 {
				t.Fatalf("only %d interim publications: the history tests little", interims)
			}
		})
	}
}
