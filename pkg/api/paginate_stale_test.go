package api

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
)

// TestPagingNeverServesStale: a page-through whose pages come within the build lease but span more than
// --stale-after (45 s here) of collections continues from the newest committed collection once its own is that
// old: every pod once, with values no older than --stale-after. Before, each page renewed the lease of the first
// page's build, so later pages served values older than --stale-after (or, once the build was evicted, an empty
// page without a continue token).
func TestPagingNeverServesStale(t *testing.T) {
	c := newCluster(t)
	keys := []string{"a/p1", "a/p2", "a/p3", "a/p4"}
	cpu := map[string]float64{}
	for _, key := range keys {
		ns, name := splitKey(key)
		c.addPod(ns, name)
		cpu[key] = 1
	}
	c.cycle(nil, cpu)
	s := c.podStorage()
	var got []string
	opts := &metainternalversion.ListOptions{Limit: 1}
	for page := 1; page <= len(keys)+1; page++ {
		list := podList(t, mustList(t, s, opts))
		for _, p := range list.Items {
			v := p.Containers[0].Usage[corev1.ResourceCPU]
			got = append(got, fmt.Sprintf("%s/%s=%s", p.Namespace, p.Name, v.String()))
		}
		if list.Continue == "" {
			break
		}
		for key := range cpu { // four collections, 60 s, between pages
			cpu[key] = float64(page + 1)
		}
		for range 4 {
			c.cycle(nil, cpu)
		}
		opts = &metainternalversion.ListOptions{Limit: 1, Continue: list.Continue}
	}
	if want := "a/p1=1 a/p2=2 a/p3=3 a/p4=4"; join(got) != want {
		t.Errorf("pages gave %v, want %s (each page no older than --stale-after)", got, want)
	}
}
