package api

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	apistorage "k8s.io/apiserver/pkg/storage"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// replicaPods are the pods every test replica serves, in the order lists give them.
var replicaPods = []string{"a/p1", "a/p2", "a/p3", "b/p1", "b/p2", "c/p1", "c/p2"}

// replica is one server instance over its own storage, as each replica of the high-availability overlay is: every
// pod at cpu cores, after cycles collections. Replicas made alike number their snapshots alike (storage's first
// generation comes from its clock), as two replicas started in the same millisecond do.
func replica(t *testing.T, cpu float64, cycles int) (*cluster, *podREST) {
	c := newCluster(t)
	usage := map[string]float64{}
	for _, key := range replicaPods {
		ns, name := splitKey(key)
		c.addPod(ns, name)
		usage[key] = cpu
	}
	for range cycles {
		c.cycle(nil, usage)
	}
	return c, c.podStorage()
}

// TestContinueOnAnotherReplica: the aggregator picks a replica per request, so the pages of one list alternate
// between replicas. A token that reaches the other replica continues after its key there: every pod once, no error,
// whether the replicas' generation numbers coincide (the other replica must not read the token's as its own) or not
// (before, the other replica answered 410 Gone and `kubectl get` failed).
func TestContinueOnAnotherReplica(t *testing.T) {
	for _, tc := range []struct {
		name             string
		cyclesA, cyclesB int
	}{
		{"same generation numbers", 1, 1},
		{"the other replica is ahead", 1, storage.RetainedViews + 2},
		{"the other replica is behind", storage.RetainedViews + 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, a := replica(t, 1, tc.cyclesA)
			cb, b := replica(t, 2, tc.cyclesB)
			if same := ca.store.Latest().Generation() == cb.store.Latest().Generation(); same != (tc.cyclesA == tc.cyclesB) {
				t.Fatalf("generations %d and %d", ca.store.Latest().Generation(), cb.store.Latest().Generation())
			}
			var got []string
			opts := &metainternalversion.ListOptions{Limit: 2}
			for page := 0; page < len(replicaPods); page++ {
				s, cpu := a, "1"
				if page%2 == 1 {
					s, cpu = b, "2"
				}
				obj, err := s.List(context.Background(), opts)
				if err != nil {
					t.Fatalf("page %d: %v", page, err)
				}
				list := podList(t, obj)
				for _, p := range list.Items {
					// Each page is its replica's: its items, values and resourceVersion.
					if v := p.Containers[0].Usage[corev1.ResourceCPU]; v.String() != cpu || p.ResourceVersion != list.ResourceVersion {
						t.Errorf("page %d: %s/%s at %s (resourceVersion %s of %s), want its replica's %s", page,
							p.Namespace, p.Name, v.String(), p.ResourceVersion, list.ResourceVersion, cpu)
					}
					got = append(got, p.Namespace+"/"+p.Name)
				}
				if list.Continue == "" {
					break
				}
				opts = &metainternalversion.ListOptions{Limit: 2, Continue: list.Continue}
			}
			if want := join(replicaPods); join(got) != want {
				t.Errorf("pages gave %v, want every pod once: %s", got, want)
			}
		})
	}
}

// TestWatchFromAnotherReplica: a resourceVersion names its replica and run. Another replica's is 410 Gone (the
// client lists again) even when its number is one of this replica's generations: diffing from that snapshot would
// send the client events against a baseline it never had.
func TestWatchFromAnotherReplica(t *testing.T) {
	ca, a := replica(t, 1, 2)
	cb, b := replica(t, 2, 2)
	if ga, gb := ca.store.Latest().Generation(), cb.store.Latest().Generation(); ga != gb {
		t.Fatalf("generations %d and %d: the test needs them equal", ga, gb)
	}
	ctx := context.Background()
	fromA := podList(t, mustList(t, a, nil)).ResourceVersion

	w, err := a.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: fromA})
	if err != nil {
		t.Fatalf("replica A resuming from its own %s: %v", fromA, err)
	}
	w.Stop()
	ahead := strconv.FormatUint(ca.store.Latest().Generation()+5, 10) + fromA[strings.Index(fromA, "-"):]
	if w, err := a.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: ahead}); err == nil || !apistorage.IsTooLargeResourceVersion(err) {
		if err == nil {
			w.Stop()
		}
		t.Errorf("replica A watching from its own future %s: %v, want too large", ahead, err)
	}

	gen := strconv.FormatUint(cb.store.Latest().Generation(), 10)
	for _, tc := range []struct {
		rv    string
		check func(error) bool
	}{
		{fromA, apierrors.IsResourceExpired},
		{gen, apierrors.IsResourceExpired},                  // a bare number: metrics-ring before runs were named
		{gen + "-" + newRun(), apierrors.IsResourceExpired}, // an earlier run's
		{gen + "-x", apierrors.IsBadRequest},
		{"abc", apierrors.IsBadRequest},
	} {
		w, err := b.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: tc.rv})
		if err == nil {
			w.Stop()
		}
		if !tc.check(err) {
			t.Errorf("replica B watching from %q: %v", tc.rv, err)
		}
	}
}

// TestListResourceVersions: a list's resourceVersion and resourceVersionMatch as kube-apiserver reads them, with a
// version of another replica or run never read as one of ours.
func TestListResourceVersions(t *testing.T) {
	c, s := replica(t, 1, 1)
	old := podList(t, mustList(t, s, nil)).ResourceVersion
	c.cycle(nil, map[string]float64{"a/p1": 2, "a/p2": 2, "a/p3": 2, "b/p1": 2, "b/p2": 2, "c/p1": 2, "c/p2": 2})
	cur := podList(t, mustList(t, s, nil)).ResourceVersion
	_, other := replica(t, 1, 2)
	foreign := podList(t, mustList(t, other, nil)).ResourceVersion
	if cur != s.rv(c.store.Latest()) || old == cur || foreign == cur {
		t.Fatalf("resourceVersions %s, %s, %s", old, cur, foreign)
	}
	future := versionAt(s, c.store.Latest().Generation()+1)
	exact, notOlder := metav1.ResourceVersionMatchExact, metav1.ResourceVersionMatchNotOlderThan
	for _, tc := range []struct {
		rv    string
		match metav1.ResourceVersionMatch
		limit int64
		want  string // the resourceVersion served, or the error
	}{
		{"", "", 0, cur},
		{"0", "", 0, cur},
		{"0", "", 2, cur},
		{old, exact, 0, old},
		{old, "", 2, old}, // a legacy resourceVersion with limit is exact
		{old, notOlder, 0, cur},
		{old, "", 0, cur},
		{foreign, exact, 0, "410"},
		{foreign, "", 2, "410"},
		{foreign, notOlder, 0, cur},
		{foreign, notOlder, 2, cur},
		{foreign, "", 0, cur},
		{future, notOlder, 0, "504"},
		{future, exact, 0, "504"},
		{"abc", "", 0, "400"},
	} {
		obj, err := s.List(context.Background(), &metainternalversion.ListOptions{
			ResourceVersion: tc.rv, ResourceVersionMatch: tc.match, Limit: tc.limit})
		got := ""
		if err != nil {
			got = fmt.Sprint(apierrors.ReasonForError(err), " ", err)
			switch {
			case apierrors.IsResourceExpired(err):
				got = "410"
			case apierrors.IsTimeout(err) && apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge):
				got = "504"
			case apierrors.IsBadRequest(err):
				got = "400"
			}
		} else {
			got = podList(t, obj).ResourceVersion
		}
		if got != tc.want {
			t.Errorf("resourceVersion %q, match %q, limit %d: %s, want %s", tc.rv, tc.match, tc.limit, got, tc.want)
		}
	}
}

// TestBadContinueTokens: a token that is not ours, of another kind or of another namespace is 400, never a page
// from a wrong place.
func TestBadContinueTokens(t *testing.T) {
	c, s := replica(t, 1, 1)
	ctx := context.Background()
	first := podList(t, mustList(t, s, &metainternalversion.ListOptions{Limit: 2}))
	nodeToken, err := encodeContinue(s.rv(c.store.Latest()), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		namespace string
		opts      metainternalversion.ListOptions
	}{
		"garbage":                {"", metainternalversion.ListOptions{Limit: 2, Continue: "not-a-token"}},
		"a node's key":           {"", metainternalversion.ListOptions{Limit: 2, Continue: nodeToken}},
		"another namespace's":    {"b", metainternalversion.ListOptions{Limit: 2, Continue: first.Continue}},
		"with a resourceVersion": {"", metainternalversion.ListOptions{Limit: 2, Continue: first.Continue, ResourceVersion: first.ResourceVersion}},
	} {
		ctx := ctx
		if tc.namespace != "" {
			ctx = genericapirequest.WithNamespace(ctx, tc.namespace)
		}
		if _, err := s.List(ctx, &tc.opts); !apierrors.IsBadRequest(err) {
			t.Errorf("%s: %v, want 400 BadRequest", name, err)
		}
	}
}
