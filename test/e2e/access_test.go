package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// TestRBACNamespaceScoped: a user granted get, list and watch on pods.metrics.k8s.io by a RoleBinding in one
// namespace lists and watches that namespace's pods through the aggregator, and gets 403 for another
// namespace, for all namespaces and for nodes, listing or watching; metrics-ring itself, asked directly with
// the same client certificate, draws the same line (its own SubjectAccessReview, not only kube-apiserver's).
func TestRBACNamespaceScoped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const user = "ns-reader"
	nsA, nsB, inA := twoNamespaces(t)
	_, cfg, err := env.cp.UserKubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-pod-metrics-reader", Namespace: nsA},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods"},
			Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + user, Namespace: nsA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	rbac := env.cp.Client.RbacV1()
	if _, err := rbac.Roles(nsA).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.Roles(nsA).Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
	if _, err := rbac.RoleBindings(nsA).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.RoleBindings(nsA).Delete(context.Background(), binding.Name, metav1.DeleteOptions{}) })

	for _, target := range []struct {
		name string
		cfg  *rest.Config
	}{
		{"through the aggregator", cfg},
		{"directly at metrics-ring", directConfig(cfg, env.kubelet)},
	} {
		t.Run(target.name, func(t *testing.T) {
			c, err := metricsclient.NewForConfig(target.cfg)
			if err != nil {
				t.Fatal(err)
			}
			pods := c.MetricsV1beta1().PodMetricses
			// RBAC takes effect when kube-apiserver's authorizer has seen the binding.
			framework.Eventually(t, user+" to list the pods of "+nsA, time.Minute, func(ctx context.Context) error {
				l, err := pods(nsA).List(ctx, metav1.ListOptions{})
				if err == nil && len(l.Items) != inA {
					err = fmt.Errorf("listed %d pods in %s, the simulator has %d", len(l.Items), nsA, inA)
				}
				return err
			})
			// A selection is allowed where the whole is (one SubjectAccessReview without the selector) ...
			if l, err := pods(nsA).List(ctx, metav1.ListOptions{LabelSelector: "e2e-absent!=x"}); err != nil || len(l.Items) != inA {
				t.Fatalf("list a selection of every pod in %s: %v", nsA, err)
			}
			w, err := pods(nsA).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("watch pods in %s: %v", nsA, err)
			}
			ev := nextEvent(t, w, settle)
			w.Stop()
			if pm, ok := ev.Object.(*metricsv1beta1.PodMetrics); ev.Type != watch.Added || !ok || pm.Namespace != nsA {
				t.Fatalf("watch pods in %s: first event %s %+v, want ADDED of a pod there", nsA, ev.Type, ev.Object)
			}

			for _, denied := range []struct {
				what string
				do   func(context.Context) error
			}{
				{"list pods in " + nsB, func(ctx context.Context) error { _, err := pods(nsB).List(ctx, metav1.ListOptions{}); return err }},
				// ... and denied where the whole is.
				{"list a selection of pods in " + nsB, func(ctx context.Context) error {
					_, err := pods(nsB).List(ctx, metav1.ListOptions{LabelSelector: "e2e-absent!=x"})
					return err
				}},
				{"list pods in all namespaces", func(ctx context.Context) error { _, err := pods("").List(ctx, metav1.ListOptions{}); return err }},
				{"watch pods in " + nsB, func(ctx context.Context) error { return watchErr(pods(nsB).Watch(ctx, metav1.ListOptions{})) }},
				{"watch pods in all namespaces", func(ctx context.Context) error { return watchErr(pods("").Watch(ctx, metav1.ListOptions{})) }},
				{"list nodes", func(ctx context.Context) error {
					_, err := c.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
					return err
				}},
			} {
				if err := denied.do(ctx); !apierrors.IsForbidden(err) {
					t.Errorf("%s as %s: %v, want 403 Forbidden", denied.what, user, err)
				}
			}
		})
	}
}

// TestNonResourceAccess: metrics-ring's /metrics and /debug/pprof/ answer 403 to an authenticated user without
// a nonResourceURLs rule for the path and 200 to one with it (the delegated SubjectAccessReview), each rule
// opening its own path only.
func TestNonResourceAccess(t *testing.T) {
	paths := []string{"/metrics", "/debug/pprof/"}
	users := []struct {
		name, url string // url: the rule's nonResourceURLs entry; none for the user without one
		allowed   string // the path the rule opens
	}{
		{name: "no-debug-rule"},
		{name: "metrics-scraper", url: "/metrics", allowed: "/metrics"},
		{name: "profiler", url: "/debug/pprof/*", allowed: "/debug/pprof/"},
	}
	for _, u := range users {
		if u.url != "" {
			bindNonResource(t, u.name, u.url)
		}
	}
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			_, cfg, err := env.cp.UserKubeconfig(u.name)
			if err != nil {
				t.Fatal(err)
			}
			hc, err := rest.HTTPClientFor(directConfig(cfg, env.kubelet))
			if err != nil {
				t.Fatal(err)
			}
			defer hc.CloseIdleConnections()
			for _, p := range paths {
				want := http.StatusForbidden
				if p == u.allowed {
					want = http.StatusOK
				}
				// Allowed once kube-apiserver's authorizer has seen the binding; denials are final at once.
				framework.Eventually(t, fmt.Sprintf("GET %s as %s to be %d", p, u.name, want), time.Minute, func(ctx context.Context) error {
					code, err := getCode(ctx, hc, env.kubelet.URL()+p)
					if err == nil && code != want {
						err = fmt.Errorf("status %d", code)
					}
					return err
				})
			}
		})
	}
}

// twoNamespaces returns two namespaces of simulated pods and how many pods the first holds.
func twoNamespaces(t *testing.T) (a, b string, inA int) {
	t.Helper()
	a = env.sim.Pods()[0].Namespace
	for _, p := range env.sim.Pods() {
		switch {
		case p.Namespace == a:
			inA++
		case b == "":
			b = p.Namespace
		}
	}
	if b == "" {
		t.Fatal("the simulator has pods in one namespace only")
	}
	return a, b, inA
}

// directConfig is cfg's identity aimed at metrics-ring backend b itself, verifying its serving certificate for
// its Service's name as the aggregator does.
func directConfig(cfg *rest.Config, b *framework.Backend) *rest.Config {
	d := rest.CopyConfig(cfg)
	d.Host = b.URL()
	d.TLSClientConfig.CAData = env.api.ServingCA.CertPEM
	d.TLSClientConfig.ServerName = b.Service + "." + env.api.Namespace + ".svc"
	return d
}

// bindNonResource grants user get on the non-resource URL url for the test.
func bindNonResource(t *testing.T, user, url string) {
	t.Helper()
	ctx := context.Background()
	name := "e2e-nonresource-" + user
	rbac := env.cp.Client.RbacV1()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{url}, Verbs: []string{"get"}}},
	}
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// watchErr stops a watch that started and returns the error of one that did not.
func watchErr(w watch.Interface, err error) error {
	if w != nil {
		w.Stop()
	}
	return err
}

// getCode GETs url and returns the status.
func getCode(ctx context.Context, hc *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}
