package storage

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// cluster builds one batch per node: pods x containers samples per node, like a kubelet's response.
func cluster(nodes, pods, containers int) []Batch {
	out := make([]Batch, nodes)
	for n := range out {
		name := fmt.Sprintf("node-%d", n)
		b := Batch{Key: name, CPU: CPUCumulative, Nodes: []NodeSample{{Node: name, Sample: Sample{CPU: 1, Memory: 1 << 30, HasSwap: true}}}}
		for p := 0; p < pods; p++ {
			for c := 0; c < containers; c++ {
				b.Containers = append(b.Containers, ContainerSample{
					Namespace: fmt.Sprintf("ns-%d", p%10), Pod: fmt.Sprintf("pod-%d-%d", n, p), Container: fmt.Sprintf("c%d", c),
					Sample: Sample{StartTime: t0.Add(-time.Hour), CPU: 1, Memory: 1 << 20, Swap: float64(c << 20), HasSwap: true}})
			}
		}
		out[n] = b
	}
	return out
}

// advance moves every sample of the batches one resolution on, as the next scrape would see them.
func advance(batches []Batch, at time.Time) {
	for i := range batches {
		b := &batches[i]
		for j := range b.Nodes {
			b.Nodes[j].Timestamp = at
			b.Nodes[j].CPU += 0.5
		}
		for j := range b.Containers {
			b.Containers[j].Timestamp = at
			b.Containers[j].CPU += 0.01
		}
	}
}

func TestConcurrentStoreAndRead(t *testing.T) {
	batches := cluster(8, 10, 2)
	c := &clock{now: t0}
	var mu sync.Mutex
	s := New(Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return c.now }})
	bindEvery(s, batches)
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
					v := s.Latest()
					v.Node("node-1")
					v.Pod("ns-1", "pod-1-1")
					v.Unavailable()
				}
			}
		}()
	}
	for cycle := 1; cycle <= 20; cycle++ {
		mu.Lock()
		c.now = t0.Add(time.Duration(cycle) * 15 * time.Second)
		mu.Unlock()
		advance(batches, c.now)
		cy := s.BeginCycle()
		var wg sync.WaitGroup
		for i := range batches {
			wg.Add(1)
			go func(b *Batch) { defer wg.Done(); cy.Append(b) }(&batches[i])
		}
		wg.Wait()
		cy.Commit(Outcome{Success: true})
	}
	close(stop)
	readers.Wait()
	p, ok := s.Latest().Pod("ns-1", "pod-1-1")
	if !ok || len(p.Containers()) != 2 || p.Containers()[0].CPU != 666_667 {
		t.Fatalf("after concurrent cycles: %+v %v (want 2 containers at 0.01/15 s)", p, ok)
	}
}

// bindEvery tells s every pod of batches is Running on its batch's node, as the pod informer does.
func bindEvery(s *Storage, batches []Batch) {
	for _, b := range batches {
		for _, c := range b.Containers {
			s.PodBound(c.Namespace, c.Pod, b.Key)
		}
	}
}

// BenchmarkStoreCycle stores one collection cycle of 1,000 nodes x 30 pods x 2 containers and publishes it. Every
// sample passes the check of whose samples count (its pod is bound to its batch's node).
func BenchmarkStoreCycle(b *testing.B) {
	batches := cluster(1000, 30, 2)
	c := &clock{now: t0}
	s := New(Options{Now: c.Now})
	bindEvery(s, batches)
	for i := 0; i < 3; i++ { // warm up: every series exists and its ring is allocated
		c.now = c.now.Add(15 * time.Second)
		advance(batches, c.now)
		for j := range batches {
			s.store(&batches[j])
		}
		s.endCycle(Outcome{Success: true})
	}
	// storeCycles appends a whole cycle per iteration, each a resolution later.
	storeCycles := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.now = c.now.Add(15 * time.Second)
			advance(batches, c.now)
			cy := s.BeginCycle()
			for j := range batches {
				cy.Append(&batches[j])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/60000, "ns/sample")
	}
	b.Run("store", storeCycles)
	// Every node's capacity known: each node and pod is judged for plausibility at each batch (Plausibility).
	b.Run("store-capacity", func(b *testing.B) {
		for _, bt := range batches {
			s.NodeCapacity(bt.Key, Capacity{CPU: 64, Memory: 256 << 30})
		}
		defer func() {
			for _, bt := range batches {
				s.NodeCapacity(bt.Key, Capacity{})
			}
		}()
		storeCycles(b)
	})
	b.Run("foreign", func(b *testing.B) { // every batch reported by the next node's kubelet: all dropped
		b.ReportAllocs()
		for b.Loop() {
			cy := s.BeginCycle()
			for j := range batches {
				batches[j].Key = batches[(j+1)%len(batches)].Nodes[0].Node
				cy.Append(&batches[j])
				batches[j].Key = batches[j].Nodes[0].Node
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/60000, "ns/sample")
	})
	b.Run("publish", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.BeginCycle().Commit(Outcome{Success: true})
		}
	})
	b.Run("interim", func(b *testing.B) { // one node's batch landed a second after the previous publication
		b.ReportAllocs()
		cy := s.BeginCycle()
		for b.Loop() {
			c.now = c.now.Add(MinPublishInterval)
			cy.Append(&batches[0])
			cy.Publish()
		}
	})
	// A fifth of the nodes landed since the previous publication, as when a 5 s cycle publishes every second (10,000
	// nodes): only the publication is timed.
	b.Run("interim-fifth", func(b *testing.B) {
		b.ReportAllocs()
		cy := s.BeginCycle()
		next := 0
		for b.Loop() {
			b.StopTimer()
			c.now = c.now.Add(MinPublishInterval)
			for range len(batches) / 5 {
				cy.Append(&batches[next])
				next = (next + 1) % len(batches)
			}
			b.StartTimer()
			cy.Publish()
		}
	})
}

// BenchmarkRead reads every pod and node of a 1,000 x 30 x 2 cluster, as a list of all pods does: from a commit's
// snapshot, and from one with maxPatches interim patches over it, each of 1/maxPatches of the nodes (the deepest a
// read walks).
func BenchmarkRead(b *testing.B) {
	batches := cluster(1000, 30, 2)
	c := &clock{now: t0}
	s := New(Options{Now: c.Now})
	bindEvery(s, batches)
	for i := 0; i < 2; i++ {
		c.now = c.now.Add(15 * time.Second)
		advance(batches, c.now)
		for j := range batches {
			s.store(&batches[j])
		}
		s.endCycle(Outcome{Success: true})
	}
	read := func(b *testing.B) {
		if _, ok := s.Latest().Pod("ns-0", "pod-0-0"); !ok {
			b.Fatal("not servable")
		}
		b.ReportAllocs()
		for b.Loop() {
			v := s.Latest() // one snapshot per list, as a request reads
			for n := range batches {
				v.Node(batches[n].Key)
				for j := 0; j < len(batches[n].Containers); j += 2 {
					cs := &batches[n].Containers[j]
					v.Pod(cs.Namespace, cs.Pod)
				}
			}
		}
	}
	b.Run("committed", read)
	cy := s.BeginCycle()
	advance(batches, c.now.Add(15*time.Second))
	for part := range maxPatches {
		c.now = c.now.Add(MinPublishInterval)
		for j := part * len(batches) / maxPatches; j < (part+1)*len(batches)/maxPatches; j++ {
			cy.Append(&batches[j])
		}
		cy.Publish()
	}
	if d := s.view.Load().pods.depth; d != maxPatches {
		b.Fatalf("%d patches deep, want %d", d, maxPatches)
	}
	b.Run("patched", read)
}

// BenchmarkRetainedPerSeries reports the heap storage keeps per series (rings, series, pods, the published and
// retained snapshots) for 1,000 nodes x 30 pods x 2 containers at the default history, after RetainedViews cycles.
// In steady-interims each cycle lands its batches in 15 parts with a publication after each, as at 10,000 nodes
// (a 15 s cycle publishing every second), so the retained snapshots include interim ones.
func BenchmarkRetainedPerSeries(b *testing.B) {
	for _, parts := range []int{1, 15} {
		name := "commits"
		if parts > 1 {
			name = "steady-interims"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				batches := cluster(1000, 30, 2)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c := &clock{now: t0}
				s := New(Options{Now: c.Now})
				bindEvery(s, batches)
				for range 2 * RetainedViews {
					advance(batches, c.now.Add(15*time.Second))
					cy := s.BeginCycle()
					for part := range parts {
						c.now = c.now.Add(15 * time.Second / time.Duration(parts))
						for j := part * len(batches) / parts; j < (part+1)*len(batches)/parts; j++ {
							cy.Append(&batches[j])
						}
						if part < parts-1 {
							cy.Publish()
						}
					}
					cy.Commit(Outcome{Success: true})
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(s)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/61000, "B/series")
			}
		})
	}
}
