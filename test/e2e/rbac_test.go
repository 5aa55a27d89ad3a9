package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// TestRBAC: a user without RBAC gets 403 Forbidden from kubectl top and client-go; once bound to a role that
// includes metrics.k8s.io (the aggregated reader role directly, or the built-in view role it aggregates
// into), the same user gets data.
func TestRBAC(t *testing.T) {
	// The view role gets metrics.k8s.io through ClusterRole aggregation, a kube-controller-manager controller.
	if err := env.cp.StartControllerManager(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ user, role string }{
		{"nobody", "system:aggregated-metrics-reader"},
		{"viewer", "view"},
	} {
		t.Run(tc.user+"-bound-to-"+tc.role, func(t *testing.T) { testRBAC(t, tc.user, tc.role) })
	}
}

func testRBAC(t *testing.T, user, role string) {
	ctx := context.Background()
	kubeconfig, cfg, err := env.cp.UserKubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.sim.Pods()[0].Namespace

	out, err := env.cp.Kubectl(ctx, kubeconfig, "top", "pods", "-n", ns)
	if err == nil || !strings.Contains(out, "Forbidden") || !strings.Contains(out, user) {
		t.Fatalf("kubectl top pods as %s without RBAC: err %v, output %q; want Forbidden naming the user", user, err, out)
	}
	if _, err := mc.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing pod metrics as %s without RBAC: %v, want 403 Forbidden", user, err)
	}
	if _, err := mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing node metrics as %s without RBAC: %v, want 403 Forbidden", user, err)
	}

	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := env.cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})

	// metrics-ring caches authorization decisions briefly (as metrics-server does), so allow a bounded wait.
	framework.Eventually(t, user+" to be allowed after binding "+role, time.Minute, func(ctx context.Context) error {
		list, err := mc.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		want := 0
		for _, p := range env.sim.Pods() {
			if p.Namespace == ns {
				want++
			}
		}
		if len(list.Items) != want {
			return fmt.Errorf("listed %d pods in %s, the simulator has %d", len(list.Items), ns, want)
		}
		if _, err := mc.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		out, err := env.cp.Kubectl(ctx, kubeconfig, "top", "pods", "-n", ns, "--no-headers")
		if err != nil {
			return err
		}
		if rows := len(strings.Split(strings.TrimSpace(out), "\n")); rows != want {
			return fmt.Errorf("kubectl top pods as %s printed %d rows, want %d:\n%s", user, rows, want, out)
		}
		return nil
	})
}

// TestUnauthenticated: a bearer token nobody issued is 401 Unauthorized through the aggregator and directly at
// metrics-ring (which asks kube-apiserver's TokenReview, as a delegated authenticator does), never data.
func TestUnauthenticated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, target := range []struct{ name, url string }{
		{"through the aggregator", env.cp.URL},
		{"directly", env.kubelet.URL()},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.url+"/apis/metrics.k8s.io/v1beta1/nodes", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer not-a-token-anyone-issued")
		// Only who the client is matters here, not who the server is: loopback, so skip verification.
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", target.name, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401: %s", target.name, resp.StatusCode, body)
		}
	}
}
