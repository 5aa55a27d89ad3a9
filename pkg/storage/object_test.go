package storage

import (
	"strings"
	"testing"
	"time"
)

// TestSamplesBelongToThePodObject follows DESIGN.md section 2, "Whose samples count": samples belong to the pod
// object, not its name. A pod re-created under its name (deleted and added, or a UID seen to change on an update)
// loses its predecessor's series at once, and a sample stamped before it was created, or of a container started
// before it (the predecessor's containers, still reported after a force-delete), is never stored for it. Each
// point names the object it was measured for.
func TestSamplesBelongToThePodObject(t *testing.T) {
	sec := time.Second
	old := PodObject{Namespace: "ns", Name: "p", Node: "n1", UID: 1, Created: t0.Add(-2 * time.Hour)}
	recreated := PodObject{Namespace: "ns", Name: "p", Node: "n1", UID: 2, Created: t0.Add(40 * sec)}
	type report struct {
		at, ts, start time.Duration // the batch's time, the sample's and the container's start, from t0
		cpu, mem      float64
		prometheus    bool
	}
	oldInstance := func(at, ts time.Duration) report { // 0.3 cores and 80 MiB, started an hour ago
		return report{at: at, ts: ts, start: -time.Hour, cpu: 1000 + 0.3*ts.Seconds(), mem: 80 << 20}
	}
	cases := []struct {
		name            string
		deleted         bool // the old object is deleted before the new one is bound, rather than updated in place
		after           []report
		wantOK          bool
		wantMem         float64
		wantPredecessor int
	}{
		{name: "deleted and re-created: nothing is served until the new pod's own samples",
			deleted: true},
		{name: "a UID seen to change on an update drops the old series at once"},
		{name: "the predecessor's last sample, stamped before the new pod was created, is not stored",
			deleted: true, after: []report{oldInstance(45*sec, 30*sec)}, wantPredecessor: 1},
		{name: "the predecessor's containers still reported after the new pod's creation are not stored",
			// A force-delete: the kubelet goes on reporting the old instance, freshly stamped.
			deleted: true, after: []report{oldInstance(45*sec, 45*sec), oldInstance(60*sec, 60*sec)}, wantPredecessor: 1},
		{name: "the new pod's own containers are served",
			after: []report{oldInstance(45*sec, 44*sec),
				{at: 60 * sec, ts: 60 * sec, start: 42 * sec, cpu: 0.04 * 18, mem: 20 << 20},
				{at: 75 * sec, ts: 75 * sec, start: 42 * sec, cpu: 0.04 * 33, mem: 20 << 20}},
			wantOK: true, wantMem: 20 << 20, wantPredecessor: 1},
		{name: "a container started within the clocks' skew before the creation is the new pod's",
			after: []report{{at: 45 * sec, ts: 45 * sec, start: 37 * sec, cpu: 0.04 * 8, mem: 20 << 20},
				{at: 60 * sec, ts: 60 * sec, start: 37 * sec, cpu: 0.04 * 23, mem: 20 << 20}},
			wantOK: true, wantMem: 20 << 20},
		{name: "a Prometheus rate stamped before the creation is not stored",
			after:           []report{{at: 45 * sec, ts: 30 * sec, cpu: 0.3, mem: 80 << 20, prometheus: true}},
			wantPredecessor: 1},
		{name: "a Prometheus rate stamped after the creation is the new pod's",
			after:  []report{{at: 45 * sec, ts: 45 * sec, cpu: 0.04, mem: 20 << 20, prometheus: true}},
			wantOK: true, wantMem: 20 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(Options{})
			f.BindPod(old)
			for _, at := range []time.Duration{0, 15 * sec, 30 * sec} {
				r := oldInstance(at, at)
				f.scrape(at, nil, []ContainerSample{ctr("p", "app", r.ts, r.start, r.cpu, r.mem)})
			}
			if got, ok := f.Pod("ns", "p"); !ok || got.UID != old.UID {
				t.Fatalf("the old pod is not served as its object: %v, UID %d, want %d", ok, got.UID, old.UID)
			}
			if tc.deleted {
				f.PodDeleted("ns", "p")
			}
			removals := f.Removals()
			f.BindPod(recreated)
			// Either way readers learn the predecessor left: a build listing it is not reused (Removals).
			if !tc.deleted && f.Removals() != removals+1 {
				t.Errorf("a UID change counted %d removals, want 1", f.Removals()-removals)
			}
			if gone, _, _ := f.RemovedAfter(f.Removals() - 1); len(gone) != 1 || gone[0] != (Removal{Namespace: "ns", Name: "p"}) {
				t.Errorf("the last removal: %v, want ns/p", gone)
			}
			// At once, not at the next publication: the API joins the new object with whatever is published.
			if got, ok := f.Pod("ns", "p"); ok {
				t.Fatalf("the re-created pod is served its predecessor's point until the next publication: %+v", got.Containers())
			}
			f.clock.now = t0.Add(40 * sec)
			f.endCycle(Outcome{Success: true})
			var rej Rejection
			for _, r := range tc.after {
				f.clock.now = t0.Add(r.at)
				b := &Batch{Key: "n1", CPU: CPUCumulative}
				c := ctr("p", "app", r.ts, r.start, r.cpu, r.mem)
				if r.prometheus {
					b.Key, b.CPU, b.Window, c.StartTime = "", CPURate, 15*sec, time.Time{}
				}
				b.Containers = []ContainerSample{c}
				rej.Add(f.store(b))
				f.endCycle(Outcome{Success: true})
				if got, ok := f.Pod("ns", "p"); ok && got.Containers()[0].Memory == 80<<20 {
					t.Fatalf("at %s the new pod is served its predecessor's values: %+v", r.at, got.Containers())
				}
			}
			if rej.Predecessor < tc.wantPredecessor || (tc.wantPredecessor == 0) != (rej.Predecessor == 0) {
				t.Errorf("predecessor samples = %d, want %d (%+v)", rej.Predecessor, tc.wantPredecessor, rej)
			}
			if tc.wantPredecessor > 0 && !strings.Contains(rej.PredecessorPod, "ns/p") {
				t.Errorf("the rejection does not name the pod: %q", rej.PredecessorPod)
			}
			got, ok := f.Pod("ns", "p")
			if ok != tc.wantOK {
				t.Fatalf("servable = %v, want %v (%+v)", ok, tc.wantOK, got.Containers())
			}
			if ok && float64(got.Containers()[0].Memory) != tc.wantMem {
				t.Errorf("memory = %d, want %v", got.Containers()[0].Memory, tc.wantMem)
			}
			if ok && got.UID != recreated.UID {
				t.Errorf("the new pod's point is of object %d, want %d: the API would not join it with its object", got.UID, recreated.UID)
			}
		})
	}
}
