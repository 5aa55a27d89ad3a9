package scraper

import (
	"bytes"
	"testing"
	"time"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// FuzzParse checks that no body makes the parser panic, and that what it emits is well-formed.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"metrics-resource-30pods.txt", "metrics-resource-110pods.txt"} {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte(node1 + ctr("a", "c", 1, 2) + "garbage {\n" + ctr("b", "c", 3, 4)))
	f.Add([]byte(node1 + "node_swap_usage_bytes NaN\n" + ctr("a", "c", 1, 2) + swapLine("a", "c", "-1") + swapLine("z", "c", "2")))
	f.Add([]byte(`{"container_cpu_usage_seconds_total",container="c",namespace="n",pod="p\n"} 1 2` + "\n"))
	f.Add([]byte("# HELP x \\n\n# TYPE x counter\nx{a=\"\n\"} 1\n" + node1[:20]))
	p := newParser()
	var b storage.Batch
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		stats := p.parse(in, time.Unix(100, 0), "n", &b)
		if !bytes.Equal(in, orig) {
			t.Fatalf("parse changed its input")
		}
		lines := bytes.Count(in, []byte{'\n'}) + 1
		if len(b.Containers) > lines || stats.BadLines > lines {
			t.Fatalf("%d containers and %d bad lines from %d lines", len(b.Containers), stats.BadLines, lines)
		}
		for _, c := range b.Containers {
			if c.Namespace == "" || c.Pod == "" || c.Container == "" {
				t.Fatalf("container sample without a name: %+v", c)
			}
		}
		if len(b.Nodes) > 1 || (len(b.Nodes) == 1 && b.Nodes[0].Node != "n") {
			t.Fatalf("node samples %+v", b.Nodes)
		}
		if stats.BadLines > 0 && stats.FirstError == nil {
			t.Fatalf("bad lines without an error")
		}
	})
}

// benchmarkParse parses the fixture with each of n parsers in turn, each warmed up (containers interned, batch
// sized) by one parse first.
func benchmarkParse(b *testing.B, name string, n int) {
	body := withSpare(readFixture(b, name))
	parsers := make([]*parser, n)
	var batch storage.Batch
	now := time.Now()
	for i := range parsers {
		parsers[i] = newParser()
		parsers[i].parse(body, now, "node", &batch)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		parsers[i%n].parse(body, now, "node", &batch)
		i++
	}
}

// BenchmarkParse1000Nodes parses a 30-pod response with each of 1,000 parsers in turn, as a cycle of 1,000 nodes
// does: unlike one parser's, their interned containers (60,000) are not in the CPU's caches.
func BenchmarkParse1000Nodes(b *testing.B) { benchmarkParse(b, "metrics-resource-30pods.txt", 1000) }
func BenchmarkParse30Pods(b *testing.B)    { benchmarkParse(b, "metrics-resource-30pods.txt", 1) }
func BenchmarkParse110Pods(b *testing.B)   { benchmarkParse(b, "metrics-resource-110pods.txt", 1) }
