package kubeletsim

import (
	"testing"
	"time"
)

// TestInstanceFaults: AlternateInstances reports the old instance (its start time and large counter) at every
// every-th scrape and the new one (started now, a small counter) otherwise; FarFutureStart reports a start time
// past int64 nanoseconds; DetachPod keeps a pod reported while Truth forgets it.
func TestInstanceFaults(t *testing.T) {
	s := startSim(t, Config{Nodes: 1, PodsPerNode: 2, ContainersPerPod: 2})
	c := client(t, s)
	ref := s.Pods()[0]
	key := ref.Namespace + "/" + ref.Name + "/app"
	startOf := func() (start, cpu float64) {
		mfs, _ := scrape(t, s, c, ref.Node, "/metrics/resource")
		st := series(mfs["container_start_time_seconds"], "namespace", "pod", "container")[key]
		cu := series(mfs["container_cpu_usage_seconds_total"], "namespace", "pod", "container")[key]
		if st == nil || cu == nil {
			t.Fatalf("%s not reported", key)
		}
		return value(st), value(cu)
	}
	oldStart, oldCPU := startOf()
	before := time.Now()
	if err := s.AlternateInstances(ref.Namespace, ref.Name, "app", 2); err != nil {
		t.Fatal(err)
	}
	var olds, news int
	for range 4 {
		start, cpu := startOf()
		switch {
		case start == oldStart && cpu >= oldCPU:
			olds++
		case start >= float64(before.Unix()) && cpu < oldCPU:
			news++
		default:
			t.Errorf("start %v cpu %v is neither instance (old: start %v cpu %v)", start, cpu, oldStart, oldCPU)
		}
	}
	if olds != 2 || news != 2 {
		t.Errorf("old instance reported %d times and new %d in 4 scrapes, want 2 each", olds, news)
	}
	if err := s.AlternateInstances(ref.Namespace, ref.Name, "app", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.FarFutureStart(ref.Namespace, ref.Name, "app", true); err != nil {
		t.Fatal(err)
	}
	if start, _ := startOf(); start < 2e10 {
		t.Errorf("start %v, want one in the year 2611 (about 2.02e10 s)", start)
	}
	if err := s.FarFutureStart(ref.Namespace, ref.Name, "app", false); err != nil {
		t.Fatal(err)
	}
	stop, err := s.DetachPod(ref.Namespace, ref.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Truth().Pods[ref.Namespace+"/"+ref.Name]; ok {
		t.Error("a detached pod is still in Truth")
	}
	startOf() // still reported
	stop()
	mfs, _ := scrape(t, s, c, ref.Node, "/metrics/resource")
	if _, ok := series(mfs["container_start_time_seconds"], "namespace", "pod", "container")[key]; ok {
		t.Error("a detached pod is reported after its reports stopped")
	}
}
