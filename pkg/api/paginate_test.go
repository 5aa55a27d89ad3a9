package api

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"

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

	first, err := s.List(ctx, &metainternalversion.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < storage.RetainedViews; i++ {
		c.cycle(nil, map[string]float64{"a/y": 1})
	}
	_, err = s.List(ctx, &metainternalversion.ListOptions{Limit: 1, Continue: podList(t, first).Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("a continue token older than the retained collections: %v, want 410 Gone", err)
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
