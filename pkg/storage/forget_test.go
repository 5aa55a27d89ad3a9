package storage

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
	"weak"
)

// parsedNames are a container's names as the kubelet parser hands them over: one allocation (namespace, pod and
// container name end to end), each name a substring of it.
func parsedNames(namespace, pod, container string) ContainerSample {
	key := namespace + pod + container
	podAt, nameAt := len(namespace), len(namespace)+len(pod)
	return ContainerSample{Namespace: key[:podAt], Pod: key[podAt:nameAt], Container: key[nameAt:]}
}

// TestViewsKeepNoNamesOfReplacedPods: pods are replaced (deleted, and others bound in their place) while every
// container is named "app", as a Deployment's are. Once a replaced pod's views are gone, nothing of storage may
// keep its names: a full layer shared the previous layer's names when they were equal strings, so each place kept
// the names of the first pod that had it, and with them that pod's whole allocation, through every pod after it.
// In the soak, the heap grew by a deleted pod's names per container replaced, until every container's place held one.
func TestViewsKeepNoNamesOfReplacedPods(t *testing.T) {
	f := newFixture(Options{})
	const pods, cycles, replacedPerCycle = 30, 30, 3
	live := make([]ContainerSample, pods)
	made := 0
	bind := func(i int) {
		made++
		live[i] = parsedNames("ns", fmt.Sprintf("pod-with-a-name-long-enough-for-an-allocation-%d", made), "app")
		f.PodBound("ns", strings.Clone(live[i].Pod), "n1") // the informer's strings, not the parser's
	}
	for i := range live {
		bind(i)
	}
	var gone []weak.Pointer[byte] // the replaced pods' names, each of a pod replaced 8 cycles or more before the end
	for c := range cycles {
		at := time.Duration(c) * 15 * time.Second
		cs := make([]ContainerSample, len(live))
		for i, smp := range live {
			smp.Sample = Sample{Timestamp: t0.Add(at), StartTime: t0.Add(-time.Hour), CPU: 1 + at.Seconds(), Memory: 1e6}
			cs[i] = smp
		}
		f.scrape(at, []NodeSample{node("n1", at, 1+at.Seconds(), 1e9)}, cs)
		if c >= cycles-8 {
			continue
		}
		for r := range replacedPerCycle {
			i := (c*replacedPerCycle + r) % pods
			f.PodDeleted("ns", strings.Clone(live[i].Pod))
			gone = append(gone, weak.Make(unsafe.StringData(live[i].Namespace)))
			bind(i)
		}
	}
	if _, ok := f.Pod("ns", live[0].Pod); !ok {
		t.Fatal("a live pod is not served")
	}
	runtime.GC()
	kept := 0
	for _, w := range gone {
		if w.Value() != nil {
			kept++
		}
	}
	if kept > 0 {
		t.Errorf("the names of %d of %d pods replaced 8 cycles or more ago are still reachable", kept, len(gone))
	}
	runtime.KeepAlive(f)
}
