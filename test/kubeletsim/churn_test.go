package kubeletsim

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// churnCluster is the cluster every churn test starts from.
var churnCluster = Config{Nodes: 4, PodsPerNode: 3, ContainersPerPod: 2, Namespaces: 2, WorkloadPods: 2}

// TestChurnTruthFollows replaces pods, restarts containers and takes a node out and back, then checks every
// node's /metrics/resource (the kubelet's collector and the fast renderer) against Truth.
func TestChurnTruthFollows(t *testing.T) {
	for _, fast := range []bool{false, true} {
		cfg := churnCluster
		cfg.FastResource = fast
		s := startSim(t, cfg)
		c := client(t, s)
		pl := s.NewPlanner(1)
		now := time.Now().Truncate(time.Second)
		var replaced []Step
		removed := map[string]bool{}
		for range 5 {
			remove, add, err := pl.Replace(now)
			if err != nil {
				t.Fatalf("Replace: %v", err)
			}
			removed[podKey(remove.Namespace, remove.Pod)] = true
			if _, ok := s.Truth().Pods[podKey(remove.Namespace, remove.Pod)]; ok {
				t.Errorf("removed pod %s/%s still in Truth", remove.Namespace, remove.Pod)
			}
			if err := s.Apply(add); err != nil {
				t.Fatalf("Apply(%+v): %v", add, err)
			}
			replaced = append(replaced, add)
		}
		restart, err := pl.Restart(now)
		if err != nil {
			t.Fatalf("Restart: %v", err)
		}
		before := s.Truth()
		if err := s.Apply(restart); err != nil {
			t.Fatalf("Apply(%+v): %v", restart, err)
		}
		after := s.Truth()
		if !reflect.DeepEqual(before.Pods, after.Pods) {
			t.Errorf("a restart changed Truth's usage: a restarted container uses what it used")
		}
		if got := after.Changed[podKey(restart.Namespace, restart.Pod)]; !got.Equal(now) {
			t.Errorf("Truth.Changed of the restarted pod = %v, want %v", got, now)
		}
		truth := s.Truth()
		if len(truth.Pods) != 12 {
			t.Errorf("Truth has %d pods after replacements, want 12", len(truth.Pods))
		}
		for _, add := range replaced {
			if removed[podKey(add.Namespace, add.Pod)] {
				continue // replaced in turn
			}
			cpu, mem := DefaultUsage(add.Index, 0, cfg.ContainersPerPod)
			u, ok := truth.Pods[podKey(add.Namespace, add.Pod)]["app"]
			if !ok || u.CPUNanoCores != cpu || u.MemoryBytes != mem {
				t.Errorf("added pod %s/%s: Truth %+v (present %v), want the default usage of index %d: %d, %d",
					add.Namespace, add.Pod, u, ok, add.Index, cpu, mem)
			}
		}
		for _, node := range s.Nodes() {
			a, b := scrapeTwice(t, s, c, node, "/metrics/resource")
			checkNode(t, s, truth, node, a, b)
			starts := series(b["container_start_time_seconds"], "namespace", "pod", "container")
			if node == restart.Node {
				k := restart.Namespace + "/" + restart.Pod + "/" + restart.Container
				if got := value(starts[k]); got != float64(now.Unix()) {
					t.Errorf("restarted %s: start time %v, want %d", k, got, now.Unix())
				}
				cpu := series(b["container_cpu_usage_seconds_total"], "namespace", "pod", "container")
				if got, limit := value(cpu[k]), time.Since(now).Seconds(); got > limit {
					t.Errorf("restarted %s: counter %v core-s, more than a core since its restart (%v s): not reset", k, got, limit)
				}
			}
		}
	}
}

func TestNodeDownAndUp(t *testing.T) {
	s := startSim(t, churnCluster)
	c := client(t, s)
	pl := s.NewPlanner(2)
	now := time.Now()
	down, gone, adds, err := pl.NodeDown(now)
	if err != nil {
		t.Fatalf("NodeDown: %v", err)
	}
	if len(gone) != 3 || len(adds) != 3 {
		t.Fatalf("node %s: %d pods gone and %d successors, want 3 and 3", down.Node, len(gone), len(adds))
	}
	truth := s.Truth()
	if _, ok := truth.Nodes[down.Node]; ok || !s.Down(down.Node) {
		t.Errorf("node %s left but is in Truth (or not Down)", down.Node)
	}
	for _, g := range gone {
		if _, ok := truth.Pods[podKey(g.Namespace, g.Name)]; ok {
			t.Errorf("pod %s of the node that left is still in Truth", g.Name)
		}
	}
	for _, add := range adds {
		if add.Node == down.Node {
			t.Errorf("successor %s planned on the node that left", add.Pod)
		}
		if err := s.Apply(add); err != nil {
			t.Fatalf("Apply(%+v): %v", add, err)
		}
	}
	if resp, err := c.Get(nodeURL(s, down.Node, "/metrics/resource")); err == nil {
		resp.Body.Close()
		t.Errorf("the node that left answered %s, want a broken connection", resp.Status)
	}
	if err := s.Apply(Step{Op: OpAdd, Namespace: "sim-ns-0", Pod: "late", Node: down.Node, UID: adds[0].UID + "x", At: now}); err == nil {
		t.Error("a pod was added to a node that left")
	}
	up, err := pl.NodeUp(time.Now())
	if err != nil || up.Node != down.Node {
		t.Fatalf("NodeUp = %+v, %v; want node %s back", up, err, down.Node)
	}
	truth = s.Truth()
	if u := truth.Nodes[down.Node]; u.CPUNanoCores != NodeOverheadNanoCores || u.MemoryBytes != NodeOverheadMemoryBytes {
		t.Errorf("node %s back with %+v, want its overhead alone", down.Node, u)
	}
	a, b := scrapeTwice(t, s, c, down.Node, "/metrics/resource")
	checkNode(t, s, truth, down.Node, a, b)
	if got := value(b["node_cpu_usage_seconds_total"].GetMetric()[0]); got > time.Since(now).Seconds() {
		t.Errorf("node back: counter %v core-s, more than its overhead since boot: not reset", got)
	}
}

// TestStepsReplayed is how processes that share a cluster (Config.Shards) stay one cluster: Steps planned on
// one sim, sent as JSON and applied to another, leave both with the same Truth.
func TestStepsReplayed(t *testing.T) {
	planned, replayed := newSim(t, churnCluster), newSim(t, churnCluster)
	pl := planned.NewPlanner(3)
	now := time.Now()
	var steps []Step
	for i := range 40 {
		switch i % 10 {
		case 3:
			st, err := pl.Restart(now)
			if err != nil {
				t.Fatal(err)
			}
			steps = append(steps, st)
			if err := planned.Apply(st); err != nil {
				t.Fatal(err)
			}
		case 5:
			down, _, adds, err := pl.NodeDown(now)
			if err != nil {
				t.Fatal(err)
			}
			steps = append(steps, down)
			for _, add := range adds {
				if err := planned.Apply(add); err != nil {
					t.Fatal(err)
				}
				steps = append(steps, add)
			}
		case 8:
			up, err := pl.NodeUp(now)
			if err != nil {
				t.Fatal(err)
			}
			steps = append(steps, up)
		default:
			remove, add, err := pl.Replace(now)
			if err != nil {
				t.Fatal(err)
			}
			if err := planned.Apply(add); err != nil {
				t.Fatal(err)
			}
			steps = append(steps, remove, add)
		}
	}
	for _, st := range steps {
		line, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var got Step
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatal(err)
		}
		if err := replayed.Apply(got); err != nil {
			t.Fatalf("replaying %s: %v", line, err)
		}
	}
	a, b := planned.Truth(), replayed.Truth()
	if !reflect.DeepEqual(a.Nodes, b.Nodes) || !reflect.DeepEqual(a.Pods, b.Pods) ||
		!maps.EqualFunc(a.Changed, b.Changed, time.Time.Equal) {
		t.Errorf("replayed sim's Truth differs from the planning sim's")
	}
	if err := replayed.Apply(steps[0]); err == nil {
		t.Errorf("replaying a removal twice was accepted: a process that diverged would not notice")
	}
}

// TestChurnInAPI checks the objects churn writes: the successor bound to its node, owned by its workload's
// ReplicaSet, Running; a restart's new start time and count in the pod's status; a node leaving and joining.
func TestChurnInAPI(t *testing.T) {
	s := startSim(t, churnCluster)
	c := fakeClient()
	ctx := context.Background()
	ws, err := s.RegisterWorkloads(ctx, c, Workloads(churnCluster))
	if err != nil || len(ws) != 6 {
		t.Fatalf("RegisterWorkloads = %d workloads, %v; want 6", len(ws), err)
	}
	if err := s.Register(ctx, c); err != nil {
		t.Fatal(err)
	}
	pl := s.NewPlanner(4)
	remove, add, err := pl.Replace(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := DeletePodObject(ctx, c, remove.Namespace, remove.Pod); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPodObject(ctx, c, add, s.Apply); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods(remove.Namespace).Get(ctx, remove.Pod, metav1.GetOptions{}); err == nil {
		t.Errorf("replaced pod %s still exists", remove.Pod)
	}
	p, err := c.CoreV1().Pods(add.Namespace).Get(ctx, add.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != add.Node || p.Status.Phase != "Running" || p.Status.StartTime.Sub(add.At).Abs() >= time.Second {
		t.Errorf("successor: node %q phase %q start %v, want %q Running %v", p.Spec.NodeName, p.Status.Phase,
			p.Status.StartTime, add.Node, add.At)
	}
	if w := p.Labels["workload"]; len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "ReplicaSet" ||
		p.OwnerReferences[0].Name != w+"-sim" {
		t.Errorf("successor of workload %q owned by %+v, want its ReplicaSet", w, p.OwnerReferences)
	}
	restart := Step{Op: OpRestart, Namespace: add.Namespace, Pod: add.Pod, Node: add.Node, Container: "sidecar",
		At: time.Now().Add(time.Minute).Truncate(time.Second)}
	if err := s.Apply(restart); err != nil {
		t.Fatal(err)
	}
	if err := s.RestartPodObject(ctx, c, restart); err != nil {
		t.Fatal(err)
	}
	p, _ = c.CoreV1().Pods(add.Namespace).Get(ctx, add.Pod, metav1.GetOptions{})
	cs := p.Status.ContainerStatuses[1]
	if cs.RestartCount != 1 || !cs.State.Running.StartedAt.Time.Equal(restart.At) {
		t.Errorf("restarted sidecar: count %d started %v, want 1 and %v", cs.RestartCount, cs.State.Running.StartedAt, restart.At)
	}
	down, _, _, err := pl.NodeDown(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.NodeObject(ctx, c, down); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, down.Node, metav1.GetOptions{}); err == nil {
		t.Errorf("node %s left but its object remains", down.Node)
	}
	up, err := pl.NodeUp(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.NodeObject(ctx, c, up); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, up.Node, metav1.GetOptions{}); err != nil {
		t.Errorf("node %s back but not registered: %v", up.Node, err)
	}
}

func newSim(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
