package scraper

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
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
	var gone []weak.Pointer[parsedContainer]
	for _, c := range p.prev {
		gone = append(gone, weak.Make(c))
	}
	for _, prefix := range []string{"a", "b", "c"} {
		if s := p.parse(containersBody(prefix, 10), now, "n", &b); s.problems() || len(b.Containers) != 10 {
			t.Fatalf("response %q: %+v, %d containers", prefix, s, len(b.Containers))
		}
	}
	runtime.GC()
	kept := 0
	for _, w := range gone {
		if w.Value() != nil {
			kept++
		}
	}
	if kept > 0 {
		t.Errorf("%d of the 100 containers no response has mentioned for 3 responses are still reachable", kept)
	}
	if c := cap(p.prev) + cap(p.seen); c > 4*spareContainers {
		t.Errorf("the parser keeps room for %d containers after responses of 10", c)
	}
	runtime.KeepAlive(p)
}
