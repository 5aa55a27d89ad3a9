package scraper

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// containersBody is a kubelet response with a node sample and one container of pod prefix-i for i in [0, n).
func containersBody(prefix string, n int) []byte {
	var b strings.Builder
	b.WriteString("node_cpu_usage_seconds_total 10 1795262400000\nnode_memory_working_set_bytes 1e9 1795262400000\n")
	for _, metric := range []string{"container_cpu_usage_seconds_total", "container_memory_working_set_bytes"} {
		for i := range n {
			fmt.Fprintf(&b, "%s{container=\"c\",namespace=\"ns\",pod=\"%s-%d\"} 1 1795262400000\n", metric, prefix, i)
		}
	}
	return []byte(b.String())
}

// TestParserForgetsContainersGone: a node's parser keeps the containers of its last response only. Containers of
// pods deleted since must be garbage, whatever the node held before: the soak's heap grew with the parsers' spare
// room, which kept the containers of the largest responses (their names too) as long as the node lived.
func TestParserForgetsContainersGone(t *testing.T) {
	p := newParser()
	var b storage.Batch
	now := time.Unix(1795262400, 0)
	p.parse(containersBody("gone", 100), now, "n", &b)
	gone := weakPrev(p)
	for _, prefix := range []string{"a", "b", "c"} {
		if s := p.parse(containersBody(prefix, 10), now, "n", &b); s.problems() || len(b.Containers) != 10 {
			t.Fatalf("response %q: %+v, %d containers", prefix, s, len(b.Containers))
		}
	}
	if kept := reachable(gone); kept > 0 {
		t.Errorf("%d of the 100 containers no response has mentioned for 3 responses are still reachable", kept)
	}
	if c := cap(p.prev) + cap(p.seen); c > 4*spareContainers {
		t.Errorf("the parser keeps room for %d containers after responses of 10", c)
	}
	runtime.KeepAlive(p)
}

// longPrefix makes each container's names one allocation larger than 16 bytes: the tiny allocator would batch
// smaller ones, and a weak pointer to one of them would stay alive with its neighbours.
const longPrefix = "a-pod-name-long-enough-for-its-own-allocation"

// namesOf returns weak pointers to the names' allocations of the batch's containers (one allocation each: lookup).
func namesOf(b *storage.Batch) []weak.Pointer[byte] {
	var out []weak.Pointer[byte]
	for _, c := range b.Containers {
		out = append(out, weak.Make(unsafe.StringData(c.Namespace)))
	}
	return out
}

// parsedByANodeGone parses 100 containers into b with a parser then dropped (the node left: forgetGoneNodes), and
// returns weak pointers to their names.
func parsedByANodeGone(b *storage.Batch) []weak.Pointer[byte] {
	newParser().parse(containersBody("gone-"+longPrefix, 100), time.Unix(1795262400, 0), "left", b)
	return namesOf(b)
}

// reachable collects garbage and counts the pointers whose objects survived.
func reachable[T any](ws []weak.Pointer[T]) int {
	runtime.GC()
	n := 0
	for _, w := range ws {
		if w.Value() != nil {
			n++
		}
	}
	return n
}

// weakPrev returns weak pointers to the containers of the parser's last response.
func weakPrev(p *parser) []weak.Pointer[parsedContainer] {
	var out []weak.Pointer[parsedContainer]
	for _, c := range p.prev {
		out = append(out, weak.Make(c))
	}
	return out
}

// TestBatchKeepsNoNamesOfTheNodeBefore: a worker's batch goes from node to node. A node that left (its parser
// dropped, forgetGoneNodes) had 100 containers; the worker's next node has 10. The 90 names past the new length
// must not stay reachable through the batch.
func TestBatchKeepsNoNamesOfTheNodeBefore(t *testing.T) {
	var b storage.Batch
	now := time.Unix(1795262400, 0)
	names := parsedByANodeGone(&b)
	newParser().parse(containersBody("here-"+longPrefix, 10), now, "n", &b)
	if n := reachable(names); n > 0 {
		t.Errorf("%d of the 100 names of a node gone are still reachable through the worker's batch", n)
	}
	runtime.KeepAlive(&b)
}

// TestFreshShrinks: fresh is sized by the node's first response (every container is new then), and is
// cleared but never let go: a node that had 100 containers once keeps room for 100 in fresh.
func TestFreshShrinks(t *testing.T) {
	p := newParser()
	var b storage.Batch
	now := time.Unix(1795262400, 0)
	p.parse(containersBody("gone", 100), now, "n", &b)
	for _, prefix := range []string{"a", "b", "c"} {
		p.parse(containersBody(prefix, 10), now, "n", &b)
	}
	if c := cap(p.fresh); c > 2*spareContainers {
		t.Errorf("after responses of 10, fresh keeps room for %d containers", c)
	}
}

// shuffledBody is containersBody with each metric's series in a random order: lookups miss, the parser indexes.
func shuffledBody(r *rand.Rand, prefix string, n int) []byte {
	lines := strings.Split(strings.TrimSuffix(string(containersBody(prefix, n)), "\n"), "\n")
	head, cpu, mem := lines[:2], lines[2:2+n], lines[2+n:]
	r.Shuffle(n, func(i, j int) { cpu[i], cpu[j] = cpu[j], cpu[i] })
	r.Shuffle(n, func(i, j int) { mem[i], mem[j] = mem[j], mem[i] })
	return []byte(strings.Join(append(append(head, cpu...), mem...), "\n") + "\n")
}

// TestIndexForgetsContainersGone: a kubelet that shuffles its series keeps the parser's index; the index
// must keep no container of a response gone.
func TestIndexForgetsContainersGone(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := newParser()
	var b storage.Batch
	now := time.Unix(1795262400, 0)
	p.parse(shuffledBody(r, "gone", 100), now, "n", &b)
	gone := weakPrev(p)
	// 60 of 100 shuffled: past maxMisses, the index is built and kept.
	p.parse(shuffledBody(r, "gone", 100), now, "n", &b)
	if p.index == nil {
		t.Fatal("the shuffled response did not make the parser index its containers")
	}
	for _, prefix := range []string{"a", "b", "c"} {
		p.parse(shuffledBody(r, prefix, 30), now, "n", &b)
	}
	if kept := reachable(gone); kept > 0 || p.index == nil {
		t.Errorf("%d of 100 containers gone still reachable (index kept: %v)", kept, p.index != nil)
	}
	runtime.KeepAlive(p)
}
