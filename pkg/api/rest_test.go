package api

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/metrics/pkg/apis/metrics"
)

func listOpts(t *testing.T, label, field string) *metainternalversion.ListOptions {
	t.Helper()
	o := &metainternalversion.ListOptions{}
	if label != "" {
		sel, err := labels.Parse(label)
		if err != nil {
			t.Fatalf("bad test label selector %q: %v", label, err)
		}
		o.LabelSelector = sel
	}
	if field != "" {
		sel, err := fields.ParseSelector(field)
		if err != nil {
			t.Fatalf("bad test field selector %q: %v", field, err)
		}
		o.FieldSelector = sel
	}
	return o
}

func TestNodeList(t *testing.T) {
	tests := []struct {
		name, label, field, nodeSelector string
		want                             []string
		wantBadRequest                   string // substring of the 400's message
	}{
		{name: "all with metrics, sorted, without metrics left out", want: []string{"node-a", "node-b"}},
		{name: "label selector", label: "role=worker", want: []string{"node-b"}},
		{name: "label selector matching none", label: "role=gpu", want: []string{}},
		{name: "field metadata.name", field: "metadata.name=node-a", want: []string{"node-a"}},
		{name: "field metadata.name !=", field: "metadata.name!=node-a", want: []string{"node-b"}},
		{name: "field and label", label: "role=worker", field: "metadata.name=node-a", want: []string{}},
		{name: "node selector restricts", nodeSelector: "role=control-plane", want: []string{"node-a"}},
		{name: "unsupported field", field: "spec.unschedulable=true", wantBadRequest: `"spec.unschedulable"`},
		{name: "namespace is not a node field", field: "metadata.namespace=x", wantBadRequest: `"metadata.namespace"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, nodes, _ := fixture()
			var reqs labels.Requirements
			if tc.nodeSelector != "" {
				sel, err := labels.Parse(tc.nodeSelector)
				if err != nil {
					t.Fatal(err)
				}
				reqs, _ = sel.Requirements()
			}
			s := nodeRESTOf(m, nodes, reqs)
			obj, err := s.List(genericapirequest.NewContext(), listOpts(t, tc.label, tc.field))
			if tc.wantBadRequest != "" {
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.wantBadRequest) {
					t.Fatalf("want 400 naming %s, got %v", tc.wantBadRequest, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, it := range unshared(obj).(*metrics.NodeMetricsList).Items {
				got = append(got, it.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeGet(t *testing.T) {
	m, nodes, _ := fixture()
	s := nodeRESTOf(m, nodes, nil)
	obj, err := s.Get(genericapirequest.NewContext(), "node-b", nil)
	if err != nil {
		t.Fatal(err)
	}
	nm := obj.(*metrics.NodeMetrics)
	cpu, mem := nm.Usage[corev1.ResourceCPU], nm.Usage[corev1.ResourceMemory]
	if cpu.String() != "250m" || mem.String() != "3Gi" || nm.Window.Duration.String() != "15s" ||
		!nm.Timestamp.Time.Equal(sampleTime) || nm.Labels["role"] != "worker" {
		t.Fatalf("got cpu %s memory %s window %s timestamp %s labels %v", cpu.String(), mem.String(), nm.Window.Duration,
			nm.Timestamp, nm.Labels)
	}
	for _, name := range []string{"node-c" /* no metrics */, "node-x" /* no node */} {
		_, err := s.Get(genericapirequest.NewContext(), name, nil)
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `nodemetrics.metrics.k8s.io "`+name+`" not found`) {
			t.Errorf("get %s: want 404 naming it, got %v", name, err)
		}
	}
}

func TestPodList(t *testing.T) {
	tests := []struct {
		name, namespace, label, field string
		want                          []string
		wantBadRequest                string
	}{
		{name: "all namespaces sorted by namespace then name", want: []string{"ns-a/p1", "ns-a/p2", "ns-b/p1"}},
		{name: "one namespace", namespace: "ns-a", want: []string{"ns-a/p1", "ns-a/p2"}},
		{name: "empty namespace", namespace: "ns-z", want: []string{}},
		{name: "label selector", label: "app=web", want: []string{"ns-a/p2", "ns-b/p1"}},
		{name: "label selector in namespace", namespace: "ns-b", label: "app=web", want: []string{"ns-b/p1"}},
		{name: "field metadata.name", field: "metadata.name=p1", want: []string{"ns-a/p1", "ns-b/p1"}},
		{name: "field metadata.namespace", field: "metadata.namespace=ns-b", want: []string{"ns-b/p1"}},
		{name: "unsupported field", field: "spec.nodeName=node-a", wantBadRequest: `"spec.nodeName"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _, pods := fixture()
			s := podRESTOf(m, pods)
			ctx := genericapirequest.WithNamespace(context.Background(), tc.namespace)
			obj, err := s.List(ctx, listOpts(t, tc.label, tc.field))
			if tc.wantBadRequest != "" {
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.wantBadRequest) {
					t.Fatalf("want 400 naming %s, got %v", tc.wantBadRequest, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, it := range unshared(obj).(*metrics.PodMetricsList).Items {
				got = append(got, it.Namespace+"/"+it.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodGet(t *testing.T) {
	m, _, pods := fixture()
	s := podRESTOf(m, pods)
	obj, err := s.Get(genericapirequest.WithNamespace(context.Background(), "ns-a"), "p2", nil)
	if err != nil {
		t.Fatal(err)
	}
	pm := obj.(*metrics.PodMetrics)
	if len(pm.Containers) != 2 || pm.Containers[0].Name != "app" || pm.Containers[1].Name != "sidecar" {
		t.Fatalf("containers: %+v", pm.Containers)
	}
	cpu := pm.Containers[0].Usage[corev1.ResourceCPU]
	if cpu.String() != "100000001n" || pm.Namespace != "ns-a" || pm.Labels["app"] != "web" {
		t.Fatalf("got cpu %s namespace %q labels %v", cpu.String(), pm.Namespace, pm.Labels)
	}
	for _, c := range []struct{ ns, name string }{{"ns-a", "p3"}, {"ns-a", "nope"}, {"ns-b", "p2"}} {
		_, err := s.Get(genericapirequest.WithNamespace(context.Background(), c.ns), c.name, nil)
		want := `podmetrics.metrics.k8s.io "` + c.ns + "/" + c.name + `" not found`
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("get %s/%s: want 404 %q, got %v", c.ns, c.name, want, err)
		}
	}
}

func TestUnavailableIs503(t *testing.T) {
	m, nodes, pods := fixture()
	m.err = errors.New("no successful collection from the kubelet source for 1m: node-a: connection refused")
	ns, ps := nodeRESTOf(m, nodes, nil), podRESTOf(m, pods)
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")
	calls := map[string]func() error{
		"list nodes": func() error { _, err := ns.List(ctx, nil); return err },
		"get node":   func() error { _, err := ns.Get(ctx, "node-a", nil); return err },
		"list pods":  func() error { _, err := ps.List(ctx, nil); return err },
		"get pod":    func() error { _, err := ps.Get(ctx, "p1", nil); return err },
	}
	for name, call := range calls {
		err := call()
		if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "kubelet source") ||
			!strings.Contains(err.Error(), "connection refused") {
			t.Errorf("%s: want 503 naming the source and its error, got %v", name, err)
		}
	}
}
