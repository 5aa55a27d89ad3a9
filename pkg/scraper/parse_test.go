package scraper

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// fixtureTime is the sample time of every value in the fixtures (testdata/README is ../shared's README).
var fixtureTime = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withSpare returns b in an array with spare capacity, as fetch returns bodies.
func withSpare(b []byte) []byte {
	return append(make([]byte, 0, len(b)+1), b...)
}

func nanos(v float64) int64 { return int64(math.Round(v * 1e9)) }

func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		pods int
	}{
		{"metrics-resource-30pods.txt", 30},
		{"metrics-resource-110pods.txt", 110},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var b storage.Batch
			p := newParser()
			stats := p.parse(withSpare(readFixture(t, tc.file)), time.Now(), "node-1", &b)
			if stats.problems() || stats.ScrapeError {
				t.Fatalf("golden input reported problems: %+v", stats)
			}
			if len(b.Nodes) != 1 {
				t.Fatalf("want 1 node sample, got %d", len(b.Nodes))
			}
			n := b.Nodes[0]
			if n.Node != "node-1" || !n.Timestamp.Equal(fixtureTime) || n.CPU != 123456.789012345 || n.Memory != 3<<30 {
				t.Errorf("node sample %+v, want node-1 at %v, CPU 123456.789012345, memory 3 GiB", n, fixtureTime)
			}
			if len(b.Containers) != 2*tc.pods {
				t.Fatalf("want %d containers, got %d", 2*tc.pods, len(b.Containers))
			}
			got := map[string]storage.ContainerSample{}
			for _, c := range b.Containers {
				got[c.Namespace+"/"+c.Pod+"/"+c.Container] = c
			}
			for i := range tc.pods {
				ns, pod := fmt.Sprintf("ns-%d", i%5), fmt.Sprintf("app-%d-7d9f8b6c5-x%03d", i%7, i)
				appStart := fixtureTime.Add(-2 * time.Hour)
				for _, want := range []struct {
					name  string
					cpuNs int64
					mem   float64
					start time.Time
				}{
					{"app", int64(i+1) * 18_500_000_000, float64((i + 10) * 512 << 10), appStart},
					{"sidecar", int64(i+1)*18_500_000_000 + 1, float64((i+10)*512<<10 + 4096), appStart.Add(time.Second)},
				} {
					c, ok := got[ns+"/"+pod+"/"+want.name]
					if !ok {
						t.Errorf("missing container %s/%s/%s", ns, pod, want.name)
						continue
					}
					if nanos(c.CPU) != want.cpuNs || c.Memory != want.mem || !c.StartTime.Equal(want.start) ||
						!c.Timestamp.Equal(fixtureTime) {
						t.Errorf("%s/%s/%s: got CPU %vns memory %v start %v at %v; want %vns %v %v at %v", ns, pod,
							want.name, nanos(c.CPU), c.Memory, c.StartTime, c.Timestamp, want.cpuNs, want.mem,
							want.start, fixtureTime)
					}
				}
			}
		})
	}
}

const node1 = "node_cpu_usage_seconds_total 10 1000\nnode_memory_working_set_bytes 20 1000\n"

func ctr(pod, name string, cpu, mem float64) string {
	return fmt.Sprintf("container_cpu_usage_seconds_total{container=%q,namespace=\"ns\",pod=%q} %v 1000\n"+
		"container_memory_working_set_bytes{container=%q,namespace=\"ns\",pod=%q} %v 1000\n", name, pod, cpu, name, pod, mem)
}

func TestParseMalformed(t *testing.T) {
	now := time.UnixMilli(5000)
	for _, tc := range []struct {
		name       string
		in         string
		containers []string // "pod/container cpu mem", in order
		node       bool
		check      func(t *testing.T, s parseStats, b *storage.Batch)
	}{{
		name: "garbage line in the middle loses only that line",
		in: node1 + ctr("a", "c", 1, 2) + `container_cpu_usage_seconds_total{container="c" { not a metric` + "\n" +
			ctr("b", "c", 3, 4),
		containers: []string{"a/c 1 2", "b/c 3 4"}, node: true,
		check: func(t *testing.T, s parseStats, _ *storage.Batch) {
			if s.BadLines != 1 || s.FirstError == nil {
				t.Errorf("want 1 bad line with an error, got %+v", s)
			}
		},
	}, {
		name: "bad lines in a row and at the start",
		in: "{{{\n\n  <garbage>\n" + node1 + "node_cpu_usage_seconds_total 1 2 3\ncontainer_memory_working_set_bytes{=} 1\n" +
			ctr("a", "c", 1, 2),
		containers: []string{"a/c 1 2"}, node: true,
		check: func(t *testing.T, s parseStats, _ *storage.Batch) {
			if s.BadLines != 4 {
				t.Errorf("want 4 bad lines, got %d (%v)", s.BadLines, s.FirstError)
			}
		},
	}, {
		name: "NUL byte loses only its line",
		in: node1 + ctr("a", "c", 1, 2) + "\x00x 1\n" +
			"container_cpu_usage_seconds_total{container=\"c\x00\",namespace=\"ns\",pod=\"z\"} 1 1000\n" + ctr("b", "c", 3, 4),
		containers: []string{"a/c 1 2", "b/c 3 4"}, node: true,
		check: func(t *testing.T, s parseStats, _ *storage.Batch) {
			if s.BadLines != 2 {
				t.Errorf("want 2 bad lines, got %+v", s)
			}
		},
	}, {
		// Only the families read are read: a line of another is passed over by its name, whatever follows it.
		name: "lines of families not read are not read",
		in: node1 + "this is { not a metric\nx 1 2 3\npod_cpu_usage_seconds_total{garbage\n# TYPE pod_x bogus\n" +
			ctr("a", "c", 1, 2),
		containers: []string{"a/c 1 2"}, node: true,
		check: func(t *testing.T, s parseStats, _ *storage.Batch) {
			if s.problems() {
				t.Errorf("want no losses, got %+v", s)
			}
		},
	}, {
		name:       "truncated body drops the cut line",
		in:         node1 + ctr("a", "c", 1, 2) + `container_cpu_usage_seconds_total{container="c",namespace="ns",pod="b"} 3 10`,
		containers: []string{"a/c 1 2"}, node: true,
		check: func(t *testing.T, s parseStats, _ *storage.Batch) {
			if !s.Truncated || s.Incomplete != 0 {
				t.Errorf("want truncated and nothing else, got %+v", s)
			}
		},
	}, {
		name:       "duplicate series keep the first",
		in:         node1 + ctr("a", "c", 1, 2) + ctr("a", "c", 7, 8) + "node_cpu_usage_seconds_total 99 1000\n",
		containers: []string{"a/c 1 2"}, node: true,
		check: func(t *testing.T, s parseStats, b *storage.Batch) {
			if s.Duplicates != 3 || b.Nodes[0].CPU != 10 {
				t.Errorf("want 3 duplicates and the first node CPU, got %+v, %v", s, b.Nodes[0].CPU)
			}
		},
	}, {
		name: "missing timestamps use the scrape time",
		in: "node_cpu_usage_seconds_total 10\nnode_memory_working_set_bytes 20\n" +
			`container_cpu_usage_seconds_total{container="c",namespace="ns",pod="a"} 1` + "\n" +
			`container_memory_working_set_bytes{container="c",namespace="ns",pod="a"} 2` + "\n",
		containers: []string{"a/c 1 2"}, node: true,
		check: func(t *testing.T, _ parseStats, b *storage.Batch) {
			if !b.Nodes[0].Timestamp.Equal(now) || !b.Containers[0].Timestamp.Equal(now) {
				t.Errorf("want timestamps %v, got %v and %v", now, b.Nodes[0].Timestamp, b.Containers[0].Timestamp)
			}
		},
	}, {
		name: "container without memory is skipped and counted; no node is counted",
		in: ctr("a", "c", 1, 2) +
			`container_cpu_usage_seconds_total{container="lonely",namespace="ns",pod="a"} 1 1000` + "\n",
		containers: []string{"a/c 1 2"},
		check: func(t *testing.T, s parseStats, _ *storage.Batch) {
			if s.Incomplete != 1 || !s.NodeMissing {
				t.Errorf("want 1 incomplete container and the node missing, got %+v", s)
			}
		},
	}, {
		name: "missing labels",
		in: node1 + `container_cpu_usage_seconds_total{namespace="ns",pod="a"} 1 1000` + "\n" +
			`container_memory_working_set_bytes{container="",namespace="ns",pod="a"} 1 1000` + "\n",
		node: true,
		check: func(t *testing.T, s parseStats, _ *storage.Batch) {
			if s.MissingLabels != 2 {
				t.Errorf("want 2 series with missing labels, got %+v", s)
			}
		},
	}, {
		name: "invalid values pass through to storage; other families ignored",
		in: node1 + ctr("a", "c", math.NaN(), -1) + ctr("b", "c", 0, math.Inf(1)) +
			"pod_cpu_usage_seconds_total{namespace=\"ns\",pod=\"a\"} 5 1000\nresource_scrape_error 1\n",
		containers: []string{"a/c NaN -1", "b/c 0 +Inf"}, node: true,
		check: func(t *testing.T, s parseStats, _ *storage.Batch) {
			if s.problems() || !s.ScrapeError {
				t.Errorf("want no losses and the scrape error noted, got %+v", s)
			}
		},
	}, {
		// Lines of families it does not read are skipped unparsed; whatever follows them is read as ever.
		name: "families not read are skipped, and what follows them is read",
		in: "# HELP pod_cpu_usage_seconds_total x\n# TYPE pod_cpu_usage_seconds_total counter\n" +
			`pod_cpu_usage_seconds_total{namespace="ns",pod="a"} 5 1000` + "\n" +
			`pod_cpu_usage_seconds_total_other{namespace="ns",pod="a"} 5 1000` + "\n" +
			node1 + `container_swap_usage_bytes{container="c",namespace="ns",pod="a"} 0 1000` + "\n" +
			ctr("a", "c", 1, 2) + "# TYPE pod_memory_working_set_bytes gauge\n" +
			`pod_memory_working_set_bytes{namespace="ns",pod="a"} 7 1000` + "\n" +
			`container_cpu_usage_seconds_total{container="c",namespace="ns",pod="b"} 3 x` + "\n" +
			ctr("b", "c", 3, 4) + `pod_swap_usage_bytes{namespace="ns",pod="a"} 0 1000` + "\n" +
			"resource_scrape_error 1\n",
		containers: []string{"a/c 1 2", "b/c 3 4"}, node: true,
		check: func(t *testing.T, s parseStats, _ *storage.Batch) {
			if s.BadLines != 1 || s.FirstError == nil || !strings.Contains(s.FirstError.Error(), "line 12") || !s.ScrapeError {
				t.Errorf("want the bad container line (line 12) counted and the scrape error read, got %+v", s)
			}
		},
	}, {
		name: "start times: valid, fractional, invalid, past int64 nanoseconds",
		in: node1 + ctr("a", "c", 1, 2) + ctr("b", "c", 3, 4) + ctr("d", "c", 5, 6) + ctr("e", "c", 7, 8) +
			`container_start_time_seconds{container="c",namespace="ns",pod="a"} 1.5e+09` + "\n" +
			`container_start_time_seconds{container="c",namespace="ns",pod="b"} 1.25` + "\n" +
			`container_start_time_seconds{container="c",namespace="ns",pod="d"} NaN` + "\n" +
			// The year 2611: its UnixNano wraps to 2026.
			`container_start_time_seconds{container="c",namespace="ns",pod="e"} 2.0242006483709551e+10` + "\n",
		containers: []string{"a/c 1 2", "b/c 3 4", "d/c 5 6", "e/c 7 8"}, node: true,
		check: func(t *testing.T, s parseStats, b *storage.Batch) {
			want := []time.Time{time.Unix(1.5e9, 0), time.Unix(1, 250_000_000), {}, {}}
			for i, w := range want {
				if !b.Containers[i].StartTime.Equal(w) {
					t.Errorf("container %d: start %v, want %v", i, b.Containers[i].StartTime, w)
				}
			}
			if s.BadStartTime != 2 {
				t.Errorf("want 2 bad start times, got %+v", s)
			}
		},
	}, {
		name: "escaped label values, spaces, label order, UTF-8 quoted names",
		in: node1 + `container_cpu_usage_seconds_total{ pod="p\"q" , namespace="ns",container="c",} 1 1000` + "\n" +
			`{"container_memory_working_set_bytes", container="c",namespace="ns",pod="p\"q"} 2 1000` + "\n",
		containers: []string{`p"q/c 1 2`}, node: true,
	}, {
		name: "empty body",
		in:   "",
		check: func(t *testing.T, s parseStats, _ *storage.Batch) {
			if !s.NodeMissing || s.BadLines != 0 {
				t.Errorf("want only the node missing, got %+v", s)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b storage.Batch
			s := newParser().parse([]byte(tc.in), now, "n", &b)
			if (len(b.Nodes) == 1) != tc.node {
				t.Errorf("node sample present = %v, want %v", len(b.Nodes) == 1, tc.node)
			}
			var got []string
			for _, c := range b.Containers {
				if c.Namespace != "ns" {
					t.Errorf("namespace %q", c.Namespace)
				}
				got = append(got, fmt.Sprintf("%s/%s %v %v", c.Pod, c.Container, c.CPU, c.Memory))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.containers) {
				t.Errorf("containers %q, want %q", got, tc.containers)
			}
			if tc.check != nil {
				tc.check(t, s, &b)
			}
		})
	}
}

// TestParseAnyOrder: containers are found again whatever order a response lists them in (the kubelet's sorted one,
// one with containers inserted and removed, a shuffled one past the misses the parser searches for one by one),
// each once per response with the values of its own lines, and the same container is the same interned name; the
// index a shuffling kubelet needed goes once its responses keep order again.
func TestParseAnyOrder(t *testing.T) {
	p := newParser()
	var b storage.Batch
	names := make([]string, 3*maxMisses)
	for i := range names {
		names[i] = fmt.Sprintf("p%02d", i)
	}
	respond := func(order []string, cpu float64) string { // as the kubelet writes it: one metric after the other
		var cpus, mems strings.Builder
		for _, n := range order {
			fmt.Fprintf(&cpus, "container_cpu_usage_seconds_total{container=\"c\",namespace=\"ns\",pod=%q} %v 1000\n", n, cpu)
			fmt.Fprintf(&mems, "container_memory_working_set_bytes{container=\"c\",namespace=\"ns\",pod=%q} 7 1000\n", n)
		}
		return node1 + cpus.String() + mems.String()
	}
	interned := map[string]*byte{}
	check := func(step string, order []string, cpu float64) {
		t.Helper()
		p.parse([]byte(respond(order, cpu)), time.Now(), "n", &b)
		if len(b.Containers) != len(order) {
			t.Fatalf("%s: %d containers, want %d", step, len(b.Containers), len(order))
		}
		for i, c := range b.Containers {
			if c.Pod != order[i] || c.CPU != cpu {
				t.Fatalf("%s: container %d is %s with CPU %v, want %s with %v", step, i, c.Pod, c.CPU, order[i], cpu)
			}
			if d, ok := interned[c.Pod]; ok && d != unsafe.StringData(c.Pod) {
				t.Errorf("%s: %s was interned again", step, c.Pod)
			}
			interned[c.Pod] = unsafe.StringData(c.Pod)
		}
	}
	check("first", names, 1) // every container new: indexed past maxMisses, so even a first response costs a hash a line
	check("sorted", names, 1)
	if p.index != nil {
		t.Error("a response in the previous order kept an index")
	}
	edited := append(append([]string{"a-new"}, names[1:10]...), names[11:]...)
	check("one added, two removed", edited, 2)
	if p.index != nil {
		t.Error("a response with three changes built an index")
	}
	shuffled := slices.Clone(edited)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	check("shuffled", shuffled, 3)
	if p.index == nil {
		t.Error("a shuffled response did not build an index")
	}
	reversed := slices.Clone(shuffled)
	slices.Reverse(reversed)
	check("reversed", reversed, 4)
	check("in order again", shuffled, 5)
	check("and again", shuffled, 6)
	if p.index != nil {
		t.Error("the index outlived the shuffling")
	}
}

func TestParseReusesAndForgets(t *testing.T) {
	p := newParser()
	var b storage.Batch
	in := []byte(node1 + ctr("a", "c", 1, 2) + ctr("b", "c", 3, 4))
	p.parse(in, time.Now(), "n", &b)
	first := b.Containers[0].Pod
	p.parse(in, time.Now(), "n", &b)
	if len(b.Containers) != 2 || len(p.prev) != 2 {
		t.Fatalf("second parse: %d containers, %d interned", len(b.Containers), len(p.prev))
	}
	if unsafe.StringData(first) != unsafe.StringData(b.Containers[0].Pod) {
		t.Errorf("pod name was not interned between parses")
	}
	p.parse([]byte(node1+ctr("b", "c", 5, 6)), time.Now(), "n", &b)
	if len(b.Containers) != 1 || b.Containers[0].Pod != "b" || len(p.prev) != 1 {
		t.Errorf("a gone container is still there: %d containers, %d interned", len(b.Containers), len(p.prev))
	}
	// Nothing of the body stays with the parser: the worker gives a buffer a large response grew back, and
	// scratch space a freak line grew goes too.
	long := `container_cpu_usage_seconds_total{container="c",namespace="ns",pod="` + strings.Repeat(`\"`, 4096) + `"} 1 1000` + "\n"
	p.parse([]byte(node1+long), time.Now(), "n", &b)
	if p.lastName != nil || cap(p.esc[1]) > maxScratch {
		t.Errorf("the parser keeps a slice of the body (%q) or %d bytes of scratch space", p.lastName, cap(p.esc[1]))
	}
	// The caller's bytes are never changed, even for a truncated body.
	trunc := []byte(node1 + "x")
	p.parse(trunc, time.Now(), "n", &b)
	if string(trunc) != node1+"x" {
		t.Errorf("parse changed its input to %q", trunc)
	}
}

// TestParseFollowsChangingOrder checks that a parser that predicts each metric's order from the previous response
// reads responses whose order changed (containers came, went, or were listed otherwise) as a fresh parser does.
func TestParseFollowsChangingOrder(t *testing.T) {
	body := func(cpuOrder, memOrder []string) []byte {
		var sb strings.Builder
		sb.WriteString(node1)
		for _, name := range cpuOrder {
			fmt.Fprintf(&sb, "container_cpu_usage_seconds_total{container=\"c\",namespace=\"ns\",pod=%q} %d 1000\n", name, len(name))
		}
		for _, name := range memOrder {
			fmt.Fprintf(&sb, "container_memory_working_set_bytes{container=\"c\",namespace=\"ns\",pod=%q} %d 1000\n", name, 10*len(name))
		}
		return []byte(sb.String())
	}
	read := func(p *parser, in []byte) []string {
		var b storage.Batch
		stats := p.parse(in, time.Now(), "n", &b)
		out := []string{fmt.Sprintf("duplicates=%d incomplete=%d", stats.Duplicates, stats.Incomplete)}
		for _, c := range b.Containers {
			out = append(out, fmt.Sprintf("%s cpu=%g mem=%g", c.Pod, c.CPU, c.Memory))
		}
		slices.Sort(out)
		return out
	}
	p := newParser()
	for _, step := range []struct{ cpu, mem []string }{
		{[]string{"a", "bb", "ccc", "dddd"}, []string{"a", "bb", "ccc", "dddd"}},
		{[]string{"a", "bb", "ccc", "dddd"}, []string{"a", "bb", "ccc", "dddd"}},               // as predicted
		{[]string{"a", "x", "bb", "ccc", "dddd"}, []string{"a", "x", "bb", "ccc", "dddd"}},     // one came
		{[]string{"a", "ccc", "dddd"}, []string{"a", "ccc", "dddd"}},                           // two went
		{[]string{"dddd", "ccc", "a", "yyyyy"}, []string{"yyyyy", "a", "dddd", "ccc"}},         // reordered
		{[]string{"dddd", "ccc", "a", "yyyyy"}, []string{"dddd", "ccc", "a", "yyyyy", "dddd"}}, // a duplicate
	} {
		in := body(step.cpu, step.mem)
		got, want := read(p, in), read(newParser(), in)
		if !slices.Equal(got, want) {
			t.Errorf("cpu order %v, memory order %v:\n got %v\nwant %v", step.cpu, step.mem, got, want)
		}
	}
}
