package scraper

import (
	"fmt"
	"testing"
	"time"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// swapOf prints a sample's swap as the API would carry it: "-" when it has none.
func swapOf(s storage.Sample) string {
	if !s.HasSwap {
		return "-"
	}
	return fmt.Sprint(s.Swap)
}

func TestParseSwapFixtures(t *testing.T) {
	// The fixtures are a kubelet's bytes with swap families where nothing is swapped: 0 is a value, not absence.
	for _, name := range []string{"metrics-resource-30pods.txt", "metrics-resource-110pods.txt"} {
		var b storage.Batch
		newParser().parse(withSpare(readFixture(t, name)), time.Now(), "node-1", &b)
		if len(b.Nodes) != 1 || swapOf(b.Nodes[0].Sample) != "0" {
			t.Errorf("%s: node swap %v, want 0", name, b.Nodes)
		}
		for _, c := range b.Containers {
			if swapOf(c.Sample) != "0" {
				t.Errorf("%s: %s/%s/%s swap %s, want 0", name, c.Namespace, c.Pod, c.Container, swapOf(c.Sample))
			}
		}
	}
}

func swapLine(pod, name string, v string) string {
	return fmt.Sprintf("container_swap_usage_bytes{container=%q,namespace=\"ns\",pod=%q} %s 1000\n", name, pod, v)
}

func TestParseSwap(t *testing.T) {
	for _, tc := range []struct {
		name       string
		in         string
		node       string   // node swap
		containers []string // "pod/container swap", in order
		duplicates int
	}{{
		name: "no swap families (Windows, older kubelets): no swap, not zero",
		in:   node1 + ctr("a", "c", 1, 2),
		node: "-", containers: []string{"a/c -"},
	}, {
		name: "values, zero among them, in the kubelet's family order",
		in: ctr("a", "c", 1, 2) + ctr("b", "c", 3, 4) + "# TYPE container_swap_usage_bytes gauge\n" +
			swapLine("a", "c", "1.048576e+06") + swapLine("b", "c", "0") + node1 + "node_swap_usage_bytes 4096 1000\n",
		node: "4096", containers: []string{"a/c 1.048576e+06", "b/c 0"},
	}, {
		name: "a container without a swap series has none; others keep theirs",
		in:   node1 + ctr("a", "c", 1, 2) + ctr("b", "c", 3, 4) + swapLine("b", "c", "7"),
		node: "-", containers: []string{"a/c -", "b/c 7"},
	}, {
		name: "invalid values are passed on for storage to reject and count",
		in:   node1 + ctr("a", "c", 1, 2) + swapLine("a", "c", "NaN") + "node_swap_usage_bytes -1 1000\n",
		node: "-1", containers: []string{"a/c NaN"},
	}, {
		name: "a repeated swap series keeps the first",
		in: node1 + "node_swap_usage_bytes 1 1000\nnode_swap_usage_bytes 2 1000\n" + ctr("a", "c", 1, 2) +
			swapLine("a", "c", "5") + swapLine("a", "c", "6"),
		node: "1", containers: []string{"a/c 5"}, duplicates: 2,
	}, {
		name: "swap alone is not a container",
		in:   node1 + ctr("a", "c", 1, 2) + swapLine("x", "c", "5"),
		node: "-", containers: []string{"a/c -"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b storage.Batch
			s := newParser().parse([]byte(tc.in), time.UnixMilli(5000), "n", &b)
			if len(b.Nodes) != 1 || swapOf(b.Nodes[0].Sample) != tc.node {
				t.Errorf("node samples %+v, want one with swap %s", b.Nodes, tc.node)
			}
			var got []string
			for _, c := range b.Containers {
				got = append(got, fmt.Sprintf("%s/%s %s", c.Pod, c.Container, swapOf(c.Sample)))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.containers) {
				t.Errorf("containers %q, want %q", got, tc.containers)
			}
			if s.Duplicates != tc.duplicates || s.BadLines != 0 {
				t.Errorf("stats %+v, want %d duplicates and no bad lines", s, tc.duplicates)
			}
		})
	}
}

func TestParseSwapIsForgottenBetweenResponses(t *testing.T) {
	// The parser interns containers across responses of a node: a swap value must not outlive its response.
	p := newParser()
	var b storage.Batch
	p.parse([]byte(node1+"node_swap_usage_bytes 3 1000\n"+ctr("a", "c", 1, 2)+swapLine("a", "c", "9")), time.Now(), "n", &b)
	p.parse([]byte(node1+ctr("a", "c", 1, 2)), time.Now(), "n", &b)
	if swapOf(b.Nodes[0].Sample) != "-" || swapOf(b.Containers[0].Sample) != "-" {
		t.Errorf("second response without swap: node %s, container %s, want none", swapOf(b.Nodes[0].Sample),
			swapOf(b.Containers[0].Sample))
	}
}
