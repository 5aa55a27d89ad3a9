package kubeletsim

import (
	"maps"
	"slices"
	"testing"
)

// podsByNode counts the pods s places on each node.
func podsByNode(s *Sim) map[string]int {
	n := map[string]int{}
	for _, p := range s.Pods() {
		n[p.Node]++
	}
	return n
}

// TestSpread checks the pods' placement: PodsPerNode on every node without Spread; with it, every pod still there
// but on nodes drawn at random (some fuller than others, as after churn), the same for the same seed (as every
// shard must place them) and served by the node that holds them.
func TestSpread(t *testing.T) {
	cfg := Config{Nodes: 20, PodsPerNode: 100, ContainersPerPod: 1, Namespaces: 2}
	even, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for node, n := range podsByNode(even) {
		if n != cfg.PodsPerNode {
			t.Errorf("without Spread, %s holds %d pods, want %d", node, n, cfg.PodsPerNode)
		}
	}

	cfg.Spread, cfg.SpreadSeed = true, 7
	spread := startSim(t, cfg)
	counts := podsByNode(spread)
	total, fewest, most := 0, cfg.Nodes*cfg.PodsPerNode, 0
	for _, node := range spread.Nodes() {
		total += counts[node]
		fewest, most = min(fewest, counts[node]), max(most, counts[node])
	}
	if total != cfg.Nodes*cfg.PodsPerNode {
		t.Errorf("with Spread, %d pods in all, want %d", total, cfg.Nodes*cfg.PodsPerNode)
	}
	// 2,000 pods on 20 nodes at random: an even placement has no chance worth the name.
	if fewest == most {
		t.Errorf("with Spread, every node holds %d pods: not spread", most)
	}
	again, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := podsByNode(again); !maps.Equal(got, counts) {
		t.Errorf("the same seed placed pods otherwise:\n%v\nthen\n%v", counts, got)
	}
	shard := cfg
	shard.Shards, shard.Shard = 2, 1
	other, err := New(shard)
	if err != nil {
		t.Fatal(err)
	}
	if got := podsByNode(other); !maps.Equal(got, counts) {
		t.Errorf("a simulator shard placed pods otherwise:\n%v\nthen\n%v", counts, got)
	}
	// The fullest node holds more than the kubelet's default 110 pods: its Node must say it has room for them.
	if most <= 110 {
		t.Fatalf("the fullest node holds %d pods: the test's cluster no longer checks the published capacity", most)
	}
	for _, n := range spread.nodes {
		if got := spread.nodeObject(n).Status.Capacity.Pods().Value(); got < int64(most) {
			t.Errorf("%s publishes room for %d pods, and a node holds %d", n.name, got, most)
		}
	}

	// The fullest node's kubelet serves exactly the pods placed on it.
	var fullest string
	for _, node := range spread.Nodes() {
		if counts[node] == most {
			fullest = node
		}
	}
	var want []string
	for _, p := range spread.Pods() {
		if p.Node == fullest {
			want = append(want, podKey(p.Namespace, p.Name))
		}
	}
	mfs, _ := scrape(t, spread, client(t, spread), fullest, "/metrics/resource")
	got := slices.Collect(maps.Keys(series(mfs["container_memory_working_set_bytes"], "namespace", "pod")))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s serves pods %v, want the %d placed on it: %v", fullest, got, len(want), want)
	}
}
