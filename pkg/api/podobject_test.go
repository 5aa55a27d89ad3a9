package api

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// uidPod is a pod lister's object that tells which object it is, as cmd's trimmed pods do.
type uidPod struct {
	*metav1.PartialObjectMetadata
	uid uint64
}

func (p uidPod) ObjectUID() uint64 { return p.uid }

// removedOnce is a fakeMetrics whose storage counted one removal, of ns/p (its object deleted, or another under
// the name), not yet published.
type removedOnce struct{ *fakeMetrics }

func (removedOnce) Removals() uint64 { return 1 }

func (removedOnce) RemovedAfter(count uint64) ([]storage.Removal, uint64, bool) {
	if count >= 1 {
		return nil, count, true
	}
	return []storage.Removal{{Namespace: "ns", Name: "p"}}, 1, true
}

// TestPointsJoinOnlyTheirObject follows DESIGN.md section 2, "Whose samples count": a pod deleted and re-created
// under its name is in the informer before storage publishes its predecessor's removal, and until then the
// snapshot's point under the name is the predecessor's. Get and list serve a point only with the object it was
// measured for (either side unknown: served, as before objects were told apart), a build of the predecessor is
// not taken for the new object's, and a watch joining a feed at the predecessor's build is not told of it. Before,
// the new pod was served its predecessor's values (seen in the e2e TestPodRecreatedIsNeverServedItsPredecessor).
func TestPointsJoinOnlyTheirObject(t *testing.T) {
	cases := []struct {
		name              string
		pointUID, podUID  uint64
		wantServed        bool
		wantBuildReusable bool
		wantWatchTold     bool // of the entry, joining at a build made before a removal under the name
	}{
		{name: "the object the point was measured for", pointUID: 1, podUID: 1, wantServed: true, wantBuildReusable: true,
			wantWatchTold: true},
		{name: "its successor under the name", pointUID: 1, podUID: 2},
		{name: "the point's object unknown", pointUID: 0, podUID: 2, wantServed: true, wantWatchTold: true},
		{name: "the pod's object unknown", pointUID: 1, podUID: 0, wantServed: true, wantWatchTold: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			point := podPoint(storage.ContainerPoint{Name: "app", Usage: storageUsage(300_000_000, 80<<20)})
			point.UID = tc.pointUID
			m := &fakeMetrics{pods: map[string]storage.PodPoint{"ns/p": point}}
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			if err := idx.Add(uidPod{podMeta("ns", "p", map[string]string{"app": "web"}), tc.podUID}); err != nil {
				t.Fatal(err)
			}
			s := podRESTOf(m, cache.NewGenericLister(idx, podResource))
			ctx := genericapirequest.WithNamespace(context.Background(), "ns")

			_, err := s.Get(ctx, "p", nil)
			if tc.wantServed && err != nil {
				t.Errorf("get: %v, want the pod's metrics", err)
			}
			if !tc.wantServed && !apierrors.IsNotFound(err) {
				t.Errorf("get: %v, want 404: the point is its predecessor's", err)
			}
			obj, err := s.List(ctx, listOpts(t, "", ""))
			if err != nil {
				t.Fatal(err)
			}
			if n := len(unshared(obj).(*metrics.PodMetricsList).Items); (n == 1) != tc.wantServed {
				t.Errorf("list: %d items, want served %v", n, tc.wantServed)
			}

			// A build made for the point's object, read again for the object the lister has now (same name
			// and labels): reused only if they are one.
			snap := m.Latest()
			built := object{namespace: "ns", name: "p", labels: map[string]string{"app": "web"}, uid: tc.pointUID}
			es := []entry[storage.PodPoint]{{object: built, point: point}}
			now := []object{{namespace: "ns", name: "p", labels: map[string]string{"app": "web"}, uid: tc.podUID}}
			if got := sameObjects[storage.PodPoint](podKind{}, snap, es, now); got != tc.wantBuildReusable {
				t.Errorf("build of object %d reused for object %d: %v, want %v", tc.pointUID, tc.podUID, got, tc.wantBuildReusable)
			}

			// A watch joining a feed at that build, made before storage counted a removal under the name.
			w := podRESTOf(removedOnce{m}, cache.NewGenericLister(idx, podResource))
			b := &build[storage.PodPoint]{res: w, done: closed, entries: es}
			from, gone := w.current(b)
			if told := len(from.entries) == 1; told != tc.wantWatchTold {
				t.Errorf("a joining watch told of the build's object %d with object %d now under the name: %v, want %v (withheld %v)",
					tc.pointUID, tc.podUID, told, tc.wantWatchTold, gone)
			}
		})
	}
}

// TestWatchTellsARecreatedPodApart: between two deliveries a pod deleted and created again under its name (a
// StatefulSet's) is its predecessor's DELETED and its ADDED, as kube-apiserver's watch tells them; a MODIFIED, as
// before, told a client the new pod's values were the old one's next. Either object unknown: MODIFIED as before.
func TestWatchTellsARecreatedPodApart(t *testing.T) {
	for _, tc := range []struct {
		name         string
		prevUID, uid uint64
		want         []watch.EventType
	}{
		{"the same object", 1, 1, []watch.EventType{watch.Modified}},
		{"another object under the name", 1, 2, []watch.EventType{watch.Deleted, watch.Added}},
		{"the old object unknown", 0, 2, []watch.EventType{watch.Modified}},
		{"the new object unknown", 1, 0, []watch.EventType{watch.Modified}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := podRESTOf(&fakeMetrics{}, nil)
			labels := map[string]string{"app": "web"}
			at := func(uid, cpu uint64) entry[storage.PodPoint] {
				p := podPoint(storage.ContainerPoint{Name: "app", Usage: storageUsage(cpu, 80<<20)})
				p.UID = uid
				return entry[storage.PodPoint]{object: object{namespace: "ns", name: "p", labels: labels, uid: uid}, point: p}
			}
			prev := []entry[storage.PodPoint]{at(tc.prevUID, 300_000_000)}
			cur := &build[storage.PodPoint]{res: s, done: closed, rv: "2", entries: []entry[storage.PodPoint]{at(tc.uid, 100_000_000)}}
			var got []watch.EventType
			for _, ev := range diff(prev, cur, nil, nil).events {
				got = append(got, ev.Type)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
		})
	}
}
