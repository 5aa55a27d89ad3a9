package deploy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

var saUser = "system:serviceaccount:" + namespace + ":" + serviceAccount

// neededGrants is what metrics-ring asks kube-apiserver for, and a kubelet for (nodes/metrics, checked by a
// real kubelet's SubjectAccessReview; the simulator does not check).
var neededGrants = []authorizationv1.ResourceAttributes{
	{Verb: "list", Resource: "nodes"}, {Verb: "watch", Resource: "nodes"},
	{Verb: "list", Resource: "pods"}, {Verb: "watch", Resource: "pods"},
	{Verb: "get", Resource: "nodes", Subresource: "metrics"},
	{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
	{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
	{Verb: "get", Resource: "configmaps", Namespace: namespace, Name: "extension-apiserver-authentication"},
}

// allowed asks kube-apiserver's authorizer whether user in groups may do each of attrs and returns the ones
// it may not.
func allowed(ctx context.Context, user string, groups []string, attrs []authorizationv1.ResourceAttributes) ([]string, error) {
	var denied []string
	for _, a := range attrs {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups, ResourceAttributes: &a,
		}}
		res, err := env.cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("SubjectAccessReview for %s: %w", user, err)
		}
		if !res.Status.Allowed {
			denied = append(denied, fmt.Sprintf("%s %s/%s %s", a.Verb, a.Group, strings.TrimSuffix(a.Resource+"/"+a.Subresource, "/"), a.Name))
		}
	}
	return denied, nil
}

// serviceAccountMissingGrants returns an error naming every needed grant the ServiceAccount lacks.
func serviceAccountMissingGrants(ctx context.Context) error {
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	denied, err := allowed(ctx, saUser, groups, neededGrants)
	if err != nil {
		return err
	}
	if len(denied) > 0 {
		return fmt.Errorf("%s may not: %s", saUser, strings.Join(denied, "; "))
	}
	return nil
}

// TestBaseRBACServesKubectlTop: with manifests/base applied for real, metrics-ring running as the
// ServiceAccount (a TokenRequest token, as a pod gets) syncs its informers, reads the front-proxy CA, and
// delegates authentication (TokenReview) and authorization (SubjectAccessReview) of its requests, so a user
// granted only the manifests' aggregated reader role gets the truth from kubectl top: the manifests' RBAC is
// enough, and nothing else grants metrics-ring anything.
func TestBaseRBACServesKubectlTop(t *testing.T) {
	a := replicaA(t)
	ctx := context.Background()

	// The backend's credentials are the ServiceAccount's.
	out, err := env.cp.KubectlOutput(ctx, env.saKube, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != saUser {
		t.Fatalf("the backend's kubeconfig authenticates as %q, want %s", out, saUser)
	}
	if err := serviceAccountMissingGrants(ctx); err != nil {
		t.Fatal(err)
	}
	// The framework creates its own grants for its metrics-ring user under the manifests' names, unless the
	// manifests already made them: a grant to that user means the manifests lack it.
	denied, err := allowed(ctx, framework.MetricsRingUser, nil, neededGrants)
	if err != nil {
		t.Fatal(err)
	}
	if len(denied) != len(neededGrants) {
		t.Fatalf("manifests/base lacks a binding the framework had to create for user %s (it may do all but %v)", framework.MetricsRingUser, denied)
	}

	// An admin (system:masters) is let in without a SubjectAccessReview, so read as a plain user bound to
	// the manifests' reader role: every request then needs metrics-ring's delegated authorization.
	readerSeesTruth(t, "metrics-viewer", "metrics through a backend running as "+saUser+" to be the truth for a reader", settle)

	// Denials the backend shrugged off (an informer retrying, the aggregator's OpenAPI download) show in its
	// log only. (Read before the deliberate 403 below, which a verbose log would show.)
	if err := forbiddenInLog(a); err != nil {
		t.Fatalf("metrics-ring running as %s was denied something:\n%v", saUser, err)
	}

	// A bearer token sent to metrics-ring itself is checked with a TokenReview: the ServiceAccount, which may
	// not read metrics, is recognised (403 naming it), not unauthenticated (401).
	code, body, err := getWithToken(ctx, a, "/apis/metrics.k8s.io/v1beta1/nodes", env.saToken)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusForbidden || !strings.Contains(body, saUser) {
		t.Fatalf("GET nodes from %s with the ServiceAccount's token: status %d %s; want 403 naming %s", serviceA, code, body, saUser)
	}
}

// readerSeesTruth binds a plain user (no system:masters, so every request needs the backend's delegated
// authorization) to the reader role and waits until its metrics API lists and kubectl top are the truth.
func readerSeesTruth(t *testing.T, user, what string, timeout time.Duration) {
	t.Helper()
	kube, cfg, err := env.cp.UserKubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	bindReader(t, user)
	viewer, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, what, timeout, func(ctx context.Context) error {
		nodes, err := viewer.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods, err := viewer.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if err := completeAndTrue(nodes, pods); err != nil {
			return err
		}
		return topPodsMatchTruth(ctx, kube)
	})
}

// forbiddenInLog returns the lines of b's log that say it was forbidden something, joined, or nil.
func forbiddenInLog(b *framework.Backend) error {
	log, err := os.ReadFile(b.Proc.LogFile)
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			errs = append(errs, errors.New(line))
		}
	}
	return errors.Join(errs...)
}

// bindReader binds user to the manifests' system:aggregated-metrics-reader ClusterRole for the test.
func bindReader(t *testing.T, user string) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:aggregated-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	crbs := env.cp.Client.RbacV1().ClusterRoleBindings()
	if _, err := crbs.Create(context.Background(), crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crbs.Delete(context.Background(), crb.Name, metav1.DeleteOptions{}) })
}

// getWithToken GETs path from backend b directly with a bearer token, verifying its serving certificate for
// its Service's name as the aggregator does.
func getWithToken(ctx context.Context, b *framework.Backend, path, token string) (int, string, error) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(env.api.ServingCA.CertPEM)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: b.Service + "." + namespace + ".svc", MinVersion: tls.VersionTLS12,
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL()+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), err
}
