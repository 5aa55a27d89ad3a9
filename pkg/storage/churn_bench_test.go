package storage

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// churn is a storage of 1,000 nodes x 30 pods x 2 containers, all served, whose pods are replaced as rollouts and
// Jobs do: each step deletes the oldest replaced pods, creates as many under other names and publishes once, as the
// deletions' publication does (removals.go: coalesced within MinPublishInterval), and every 15th step a cycle
// commits, as at one publication a second and a 15 s resolution (so the newest commit, which storage keeps, is
// recent). Its clock does not move, so no pod goes stale and no timer is due: step publishes as publishRemovals
// would, whether or not the pods were served.
type churn struct {
	s       *Storage
	batches []Batch
	// keys holds the pods bound, oldest first, then as many names not bound, in a ring from oldest: a step deletes
	// the oldest pods and binds the oldest names not bound, so a name comes back only after every other was used.
	keys                []podKey
	pods, oldest, steps int
}

const replaced = 10 // pods replaced per publication, as 10 a second at one publication a second

func newChurn(b *testing.B) *churn {
	c := &churn{batches: cluster(1000, 30, 2)}
	clk := &clock{now: t0}
	c.s = New(Options{Now: clk.Now, AfterFunc: func(time.Duration, func()) {}})
	bindEvery(c.s, c.batches)
	for range 2 { // two cycles: every pod is served
		clk.now = clk.now.Add(15 * time.Second)
		advance(c.batches, clk.now)
		for j := range c.batches {
			c.s.store(&c.batches[j])
		}
		c.s.endCycle(Outcome{Success: true})
	}
	for _, bt := range c.batches {
		for j := 0; j < len(bt.Containers); j += 2 {
			c.keys = append(c.keys, podKey{bt.Containers[j].Namespace, bt.Containers[j].Pod})
		}
	}
	c.pods = len(c.keys)
	for i := range c.pods {
		c.keys = append(c.keys, podKey{fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("new-%d", i)})
	}
	if _, ok := c.s.Latest().Pod(c.keys[0].namespace, c.keys[0].name); !ok {
		b.Fatal("not servable")
	}
	return c
}

// step replaces pods and publishes; the commits, full builds not of the pods replaced, are not timed.
func (c *churn) step(b *testing.B) {
	for i := range replaced {
		gone, created := c.keys[(c.oldest+i)%len(c.keys)], c.keys[(c.oldest+c.pods+i)%len(c.keys)]
		c.s.PodDeleted(gone.namespace, gone.name)
		c.s.PodBound(created.namespace, created.name, c.batches[i].Key)
	}
	c.oldest = (c.oldest + replaced) % len(c.keys)
	s := c.s
	s.mu.Lock()
	s.publish(s.buildInterim(s.view.Load()), false, s.clock.mono())
	s.mu.Unlock()
	if c.steps++; c.steps%15 == 0 {
		b.StopTimer()
		s.endCycle(Outcome{Success: true})
		b.StartTimer()
	}
}

// BenchmarkPodChurn publishes snapshots while pods are replaced (churn), storage keeping its retained views. B/op and
// allocs/op are one publication's, with the changes before it; held-B is the heap the slot indexes of the views
// storage keeps (the RetainedViews newest and the newest commit) hold beyond the one storage itself keeps, its mean
// and its largest (held-max-B) over samples every 100 publications.
func BenchmarkPodChurn(b *testing.B) {
	c := newChurn(b)
	var held []int64
	b.ReportAllocs()
	for b.Loop() {
		c.step(b)
		if c.steps%100 == 0 {
			b.StopTimer()
			held = append(held, c.held())
			b.StartTimer()
		}
	}
	b.StopTimer()
	if len(held) == 0 {
		held = append(held, c.held())
	}
	var sum int64
	for _, h := range held {
		sum += h
	}
	b.ReportMetric(float64(sum)/float64(len(held)), "held-B")
	b.ReportMetric(float64(slices.Max(held)), "held-max-B")
}

// held returns the heap the slot indexes of the views storage keeps hold beyond storage's own: the heap with them,
// less the heap once every kept view shares storage's, which leaves them so (only the benchmark reads them).
func (c *churn) held() int64 {
	s := c.s
	with := heapAlloc()
	s.mu.Lock()
	for _, v := range append(*s.recent.Load(), s.view.Load(), s.committed.Load()) {
		v.index = s.slots.index
	}
	s.mu.Unlock()
	held := with - heapAlloc()
	runtime.KeepAlive(s)
	return held
}

// BenchmarkReadChurned reads every pod of the newest snapshot after 3,000 pods were replaced (150 publications), as a
// list of all pods does: by name (Pod, the pods replaced included) and by Each.
func BenchmarkReadChurned(b *testing.B) {
	c := newChurn(b)
	for range 150 {
		c.step(b)
	}
	b.Run("pod", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v := c.s.Latest()
			for i := range c.pods {
				k := c.keys[(c.oldest+i)%len(c.keys)]
				v.Pod(k.namespace, k.name)
			}
		}
	})
	b.Run("each", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			c.s.Latest().Each(nil, func(string, string) { n++ })
		}
	})
}

// heapAlloc is the live heap after a collection.
func heapAlloc() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkStorageTurnover replaces every pod of 300 nodes x 30 pods x 2 containers four times over, as a soak's
// churn does (pods deleted, successors bound under new names on the same node, their containers in the next
// scrapes), through full collection cycles with interim publications. growth-B/pod is how much the heap after a
// collection grew from the first turnover's end to the last's, per pod: storage keeping anything per pod replaced
// (names, series, slots, removals) would show there. held-B/pod is that heap at the first turnover's end, per pod:
// storage's and the benchmark's batches (the kubelets' responses) together.
func BenchmarkStorageTurnover(b *testing.B) {
	const nodes, podsPerNode, turnovers = 300, 30, 4
	const perCycle = 45 // 3 a second at a 15 s resolution: a turnover in 200 cycles
	for b.Loop() {
		batches := cluster(nodes, podsPerNode, 2)
		clk := &clock{now: t0}
		s := New(Options{Now: clk.Now, AfterFunc: func(time.Duration, func()) {}})
		bindEvery(s, batches)
		cycle := func() {
			clk.now = clk.now.Add(15 * time.Second)
			advance(batches, clk.now)
			c := s.BeginCycle()
			for j := range batches {
				c.Append(&batches[j])
				if j%(nodes/10) == 0 {
					clk.now = clk.now.Add(time.Second)
					c.Publish()
				}
			}
			c.Commit(Outcome{Success: true})
		}
		cycle()
		cycle()
		replacedSoFar := 0
		var heaps []int64
		var newest podKey
		for range turnovers * nodes * podsPerNode / perCycle {
			for range perCycle {
				i := replacedSoFar % (nodes * podsPerNode) // the oldest pod first, as a rollout replaces them
				bt, p := &batches[i%nodes], i/nodes
				gone := bt.Containers[2*p]
				s.PodDeleted(gone.Namespace, gone.Pod)
				replacedSoFar++
				name := fmt.Sprintf("next-%d", replacedSoFar)
				for k := range 2 {
					c := &bt.Containers[2*p+k]
					c.Pod, c.StartTime, c.CPU = name, clk.now.Add(-time.Second), 0.001
				}
				s.PodBound(gone.Namespace, name, bt.Key)
				newest = podKey{gone.Namespace, name}
			}
			cycle()
			if replacedSoFar%(nodes*podsPerNode) == 0 {
				b.StopTimer()
				heaps = append(heaps, heapAlloc())
				b.StartTimer()
			}
		}
		if _, ok := s.Latest().Pod(newest.namespace, newest.name); !ok {
			b.Fatalf("the newest pod %s is not served", newest)
		}
		b.ReportMetric(float64(heaps[len(heaps)-1]-heaps[0])/float64(nodes*podsPerNode), "growth-B/pod")
		b.ReportMetric(float64(heaps[0])/float64(nodes*podsPerNode), "held-B/pod")
	}
}
