package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

func TestPagesComeFromOneCollection(t *testing.T) {
	c := newCluster(t)
	// Namespaces "a" and "a-b": sorted by namespace first, "a/z" comes before "a-b/a" though "-" < "/".
	for _, key := range []string{"a/y", "a/z", "a-b/a", "b/x"} {
		ns, name := splitKey(key)
		c.addPod(ns, name)
	}
	c.cycle(nil, map[string]float64{"a/y": 1, "a/z": 2, "a-b/a": 3, "b/x": 4})
	s := c.podStorage()
	ctx := context.Background()

	var got []string
	var cpus []int64
	opts := &metainternalversion.ListOptions{Limit: 1}
	for page := 0; page < 6; page++ {
		obj, err := s.List(ctx, opts)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		list := podList(t, obj)
		for _, p := range list.Items {
			got = append(got, p.Namespace+"/"+p.Name)
			cpu := p.Containers[0].Usage[corev1.ResourceCPU]
			cpus = append(cpus, cpu.MilliValue())
		}
		if list.Continue == "" {
			break
		}
		// A collection lands between pages: the next page still reads the first page's.
		c.cycle(nil, map[string]float64{"a/y": 9, "a/z": 9, "a-b/a": 9, "b/x": 9})
		opts = &metainternalversion.ListOptions{Limit: 1, Continue: list.Continue}
	}
	if want := "a/y a/z a-b/a b/x"; join(got) != want {
		t.Errorf("pages gave %v, want %s", got, want)
	}
	for i, cpu := range cpus {
		if cpu != int64(i+1)*1000 {
			t.Errorf("%s: %dm, want the first collection's %dm", got[i], cpu, (i+1)*1000)
		}
	}

	// A token whose build and snapshot are gone continues after its key from the newest committed snapshot.
	s.builds.lease = 0
	first, err := s.List(ctx, &metainternalversion.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2*storage.RetainedViews; i++ {
		c.cycle(nil, map[string]float64{"a/y": 5, "a/z": 5, "a-b/a": 5, "b/x": 5})
	}
	kept := func() int {
		s.builds.mu.Lock()
		defer s.builds.mu.Unlock()
		return len(s.builds.gens)
	}
	for i := 0; i < 100 && kept() > 0; i++ { // the builds go once their lease is out: bounded, 2 s
		time.Sleep(20 * time.Millisecond)
	}
	obj, err := s.List(ctx, &metainternalversion.ListOptions{Limit: 1, Continue: podList(t, first).Continue})
	if err != nil {
		t.Fatalf("a continue token whose collection is gone: %v, want the next page from the newest", err)
	}
	l := podList(t, obj)
	if len(l.Items) != 1 || l.Items[0].Namespace+"/"+l.Items[0].Name != "a/z" || l.Continue == "" {
		t.Fatalf("a continue token whose collection is gone gave %v, want a/z and more", podNames(l))
	}
	if cpu := l.Items[0].Containers[0].Usage[corev1.ResourceCPU]; cpu.MilliValue() != 5000 {
		t.Errorf("a/z: %dm, want the newest collection's 5000m", cpu.MilliValue())
	}
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out
}

// TestPagingOutlastsInterimPublications: during a cycle longer than a second storage publishes what has landed every
// second, and such a snapshot is retained for only a few publications. A page-through started then reads the
// newest whole cycle (the committed snapshot), so it completes however many interim publications come meanwhile,
// with that cycle's values; a list without limit reads the newest publication.
func TestPagingOutlastsInterimPublications(t *testing.T) {
	c := newCluster(t)
	keys := []string{"a/p1", "a/p2", "a/p3", "a/p4"}
	for _, key := range keys {
		ns, name := splitKey(key)
		c.addPod(ns, name)
	}
	first := map[string]float64{"a/p1": 1, "a/p2": 1, "a/p3": 1, "a/p4": 1}
	committed := c.cycle(nil, first)
	s := c.podStorage()

	// A long cycle: one pod lands, then another, each published before the cycle commits.
	now := time.Unix(0, c.clock.Add(int64(15*time.Second)))
	cy := c.store.BeginCycle()
	publish := func(key string) {
		ns, name := splitKey(key)
		cy.Append(&storage.Batch{CPU: storage.CPURate, Window: time.Minute, Containers: []storage.ContainerSample{{
			Namespace: ns, Pod: name, Container: "app", Sample: storage.Sample{Timestamp: now, CPU: 2, Memory: 1 << 20}}}})
		c.clock.Add(int64(storage.MinPublishInterval))
		now = now.Add(storage.MinPublishInterval)
		cy.Publish()
	}
	publish("a/p1")
	if c.store.Latest().Generation() == committed {
		t.Fatal("no interim publication")
	}
	if cpu := podList(t, mustList(t, s, nil)).Items[0].Containers[0].Usage[corev1.ResourceCPU]; cpu.Value() != 2 {
		t.Errorf("a list without limit: a/p1 at %s, want the newest publication's 2", cpu.String())
	}

	var got []string
	opts := &metainternalversion.ListOptions{Limit: 1}
	for page := 0; page < len(keys)+1; page++ {
		list := podList(t, mustList(t, s, opts))
		if rv := list.ResourceVersion; rv != versionAt(s, committed) {
			t.Errorf("page %d read collection %s, want the newest committed one, %d", page, rv, committed)
		}
		for _, p := range list.Items {
			cpu := p.Containers[0].Usage[corev1.ResourceCPU]
			got = append(got, fmt.Sprintf("%s/%s=%s", p.Namespace, p.Name, cpu.String()))
		}
		if list.Continue == "" {
			break
		}
		// More interim publications than storage retains come between pages.
		for range storage.RetainedViews + 1 {
			publish(keys[page%len(keys)])
		}
		opts = &metainternalversion.ListOptions{Limit: 1, Continue: list.Continue}
	}
	if want := "a/p1=1 a/p2=1 a/p3=1 a/p4=1"; join(got) != want {
		t.Errorf("pages gave %v, want %s (the committed cycle's values, all pages)", got, want)
	}
	cy.Commit(storage.Outcome{Success: true})
}

func mustList(t *testing.T, s *podREST, opts *metainternalversion.ListOptions) runtime.Object {
	t.Helper()
	obj, err := s.List(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestPageThroughBuildsOnce: paging through 2,000 pods by 100 while a long collection cycle publishes what has
// landed between every two pages (more interim publications than storage retains) makes one build for the whole
// page-through, every pod once, all from the first page's collection. Before, a page-through made a full build for
// every page after the fourth interim publication.
func TestPageThroughBuildsOnce(t *testing.T) {
	c, k, s, cpu := hookedPods(t, 2000)
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
	cy := c.store.BeginCycle()
	defer cy.Commit(storage.Outcome{Success: true})
	seen := map[string]bool{}
	opts := &metainternalversion.ListOptions{Limit: 100}
	for page := 0; ; page++ {
		obj, err := s.List(ctx, opts)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		l := podList(t, obj)
		for _, p := range l.Items {
			if seen[p.Name] {
				t.Fatalf("page %d: %s again", page, p.Name)
			}
			seen[p.Name] = true
			if got := p.Containers[0].Usage[corev1.ResourceCPU]; got.MilliValue() != 100 {
				t.Fatalf("page %d: %s at %dm, want the first page's collection's 100m", page, p.Name, got.MilliValue())
			}
		}
		if l.Continue == "" {
			break
		}
		// A batch lands and is published before the next page.
		now := time.Unix(0, c.clock.Add(int64(storage.MinPublishInterval)))
		b := &storage.Batch{CPU: storage.CPURate, Window: time.Minute}
		for key := range cpu {
			ns, name := splitKey(key)
			b.Containers = append(b.Containers, storage.ContainerSample{Namespace: ns, Pod: name, Container: "app",
				Sample: storage.Sample{Timestamp: now, CPU: 0.3, Memory: 1 << 20}})
			break
		}
		cy.Append(b)
		cy.Publish()
		opts = &metainternalversion.ListOptions{Limit: 100, Continue: l.Continue}
	}
	if len(seen) != 2000 {
		t.Errorf("paged through %d pods, want 2,000", len(seen))
	}
	if n := k.builds.Load(); n != 1 {
		t.Errorf("a page-through of 20 pages with an interim publication between each two made %d builds, want 1", n)
	}
}
