package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// delegated is the authorizer the server gets from --authorization-kubeconfig (SubjectAccessReviews, cached as
// the flags' defaults do), against a kube-apiserver whose policy is allows; reviews counts the reviews it was sent.
func delegated(t *testing.T, allows func(authorizationv1.SubjectAccessReviewSpec) bool) (authorizer.Authorizer, *atomic.Int64) {
	t.Helper()
	a, reviews := countingDelegate(t, http.StatusOK, allows)
	return authorizeBroadFirst(a), reviews
}

// reviewingKubeAPIServer answers SubjectAccessReviews with status (500: an error) or, when 200, allows' answer; its
// URL, and reviews, the reviews it was sent (retries included).
func reviewingKubeAPIServer(t *testing.T, status int, allows func(authorizationv1.SubjectAccessReviewSpec) bool) (string, *atomic.Int64) {
	t.Helper()
	reviews := &atomic.Int64{}
	kubeAPIServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sar authorizationv1.SubjectAccessReview
		if r.URL.Path != "/apis/authorization.k8s.io/v1/subjectaccessreviews" || json.NewDecoder(r.Body).Decode(&sar) != nil {
			http.Error(w, "not a SubjectAccessReview", http.StatusBadRequest)
			return
		}
		reviews.Add(1)
		if status != http.StatusOK {
			http.Error(w, "overloaded", status)
			return
		}
		sar.Status.Allowed = allows(sar.Spec)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&sar)
	}))
	t.Cleanup(kubeAPIServer.Close)
	return kubeAPIServer.URL, reviews
}

// listWith is an HPA's list of its pods' metrics in namespace ns, selected by selector.
func listWith(t *testing.T, ns, selector string) authorizer.AttributesRecord {
	t.Helper()
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatal(err)
	}
	reqs, _ := sel.Requirements()
	return authorizer.AttributesRecord{
		User: &user.DefaultInfo{Name: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}, Verb: "list",
		Namespace: ns, APIGroup: "metrics.k8s.io", APIVersion: "v1", Resource: "pods", ResourceRequest: true,
		Path: "/apis/metrics.k8s.io/v1/namespaces/" + ns + "/pods", LabelSelectorRequirements: reqs,
	}
}

// rbacLike allows listing pod metrics in namespace "apps", whatever the selector, as RBAC does.
func rbacLike(s authorizationv1.SubjectAccessReviewSpec) bool {
	return s.ResourceAttributes != nil && s.ResourceAttributes.Namespace == "apps" && s.ResourceAttributes.Verb == "list"
}

// TestSelectionsShareOneReview: 100 HPAs of a namespace, each listing its own selection, cost kube-apiserver one
// SubjectAccessReview, not one each (each review's cache key held its selector), and every list is allowed.
func TestSelectionsShareOneReview(t *testing.T) {
	a, reviews := delegated(t, rbacLike)
	for k := range 100 {
		d, _, err := a.Authorize(context.Background(), listWith(t, "apps", fmt.Sprintf("workload=w-%d", k)))
		if err != nil || d != authorizer.DecisionAllow {
			t.Fatalf("HPA %d: %v, %v", k, d, err)
		}
	}
	if n := reviews.Load(); n != 1 {
		t.Errorf("100 HPAs' lists made %d SubjectAccessReviews, want 1", n)
	}
}

// TestSelectorsStillDecide: what only a selection is allowed (as the node authorizer allows a kubelet its own
// node's pods) stays allowed, other selections and the whole stay denied, and a request nobody may make is denied
// with its own review's answer.
func TestSelectorsStillDecide(t *testing.T) {
	a, _ := delegated(t, func(s authorizationv1.SubjectAccessReviewSpec) bool {
		l := s.ResourceAttributes.LabelSelector
		return l != nil && len(l.Requirements) == 1 && l.Requirements[0].Key == "node" &&
			len(l.Requirements[0].Values) == 1 && l.Requirements[0].Values[0] == "n1"
	})
	for _, tc := range []struct {
		ns, selector string
		want         authorizer.Decision
	}{
		{"apps", "node=n1", authorizer.DecisionAllow},
		{"apps", "node=n2", authorizer.DecisionNoOpinion},
		{"apps", "", authorizer.DecisionNoOpinion},
		{"other", "workload=w-1", authorizer.DecisionNoOpinion},
	} {
		if d, _, err := a.Authorize(context.Background(), listWith(t, tc.ns, tc.selector)); err != nil || d != tc.want {
			t.Errorf("%s %q: %v (%v), want %v", tc.ns, tc.selector, d, err, tc.want)
		}
	}
	rbac, reviews := delegated(t, rbacLike)
	if d, _, _ := rbac.Authorize(context.Background(), listWith(t, "other", "workload=w-1")); d == authorizer.DecisionAllow {
		t.Error("a selection in a namespace the user may not list was allowed")
	}
	if n := reviews.Load(); n != 2 {
		t.Errorf("a denied selection made %d reviews, want 2 (without, then with its selector)", n)
	}
}

// countingDelegate is delegated's authorizer unwrapped, against reviewingKubeAPIServer.
func countingDelegate(t *testing.T, status int, allows func(authorizationv1.SubjectAccessReviewSpec) bool) (authorizer.Authorizer, *atomic.Int64) {
	t.Helper()
	url, reviews := reviewingKubeAPIServer(t, status, allows)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: url, QPS: 1000, Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	a, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             10 * time.Second, DenyCacheTTL: 10 * time.Second,
		WebhookRetryBackoff: &wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3},
	}.New()
	if err != nil {
		t.Fatal(err)
	}
	return a, reviews
}

// TestBroadReviewErrorIsTheAnswer: when kube-apiserver fails (500, 429, a timeout), a list with a selector is not
// asked again as it is: an HPA's list would wait twice the retries' backoff and a struggling kube-apiserver get
// twice the reviews (the security review's test: 6 attempts where 3 were made before).
func TestBroadReviewErrorIsTheAnswer(t *testing.T) {
	raw, rawReviews := countingDelegate(t, http.StatusInternalServerError, nil)
	d, _, err := raw.Authorize(context.Background(), listWith(t, "apps", "workload=w"))
	if d == authorizer.DecisionAllow || err == nil {
		t.Fatalf("unwrapped: %v, %v", d, err)
	}
	inner, wrappedReviews := countingDelegate(t, http.StatusInternalServerError, nil)
	d, _, err = authorizeBroadFirst(inner).Authorize(context.Background(), listWith(t, "apps", "workload=w"))
	if d == authorizer.DecisionAllow || err == nil {
		t.Fatalf("an error on both calls must not allow: %v, %v", d, err)
	}
	if w, r := wrappedReviews.Load(), rawReviews.Load(); w > r {
		t.Errorf("with kube-apiserver failing, one list with a selector made %d review attempts, %d before", w, r)
	}
}

// TestConditionsAwareCallersShareTheReview: a caller that asks by ConditionsAwareAuthorize gets broadFirst's
// decision too (one review, not 100: the inner authorizer's method, embedded, skipped broadFirst).
func TestConditionsAwareCallersShareTheReview(t *testing.T) {
	allow := func(s authorizationv1.SubjectAccessReviewSpec) bool { return s.ResourceAttributes.Namespace == "apps" }
	inner, reviews := countingDelegate(t, http.StatusOK, allow)
	a := authorizeBroadFirst(inner)
	for k := range 100 {
		if d := a.ConditionsAwareAuthorize(context.Background(), listWith(t, "apps", fmt.Sprintf("w=%d", k))); !d.IsAllow() {
			t.Fatalf("list %d: %v", k, d)
		}
	}
	if n := reviews.Load(); n != 1 {
		t.Errorf("100 lists through ConditionsAwareAuthorize made %d reviews, 1 through Authorize", n)
	}
}

// TestBroadRequestIsTheRequestWithoutSelectors: the broad request is the request without its selectors, every other
// attribute as given; requests without (parsable) selectors, and non-resource requests, are asked once as they are.
func TestBroadRequestIsTheRequestWithoutSelectors(t *testing.T) {
	var seen []authorizer.Attributes
	record := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		seen = append(seen, a)
		return authorizer.DecisionNoOpinion, "", nil
	})
	fieldReqs := fields.ParseSelectorOrDie("metadata.name=p").Requirements()
	labelReqs, _ := labels.SelectorFromSet(labels.Set{"a": "b"}).Requirements()
	u := &user.DefaultInfo{Name: "u", UID: "1", Groups: []string{"g"}, Extra: map[string][]string{"x": {"y"}}}
	full := authorizer.AttributesRecord{User: u, Verb: "watch", Namespace: "ns", APIGroup: "metrics.k8s.io",
		APIVersion: "v1beta1", Resource: "pods", Subresource: "s", Name: "n", ResourceRequest: true, Path: "/p",
		FieldSelectorRequirements: fieldReqs, LabelSelectorRequirements: labelReqs}
	_, _, _ = authorizeBroadFirst(record).Authorize(context.Background(), full)
	broad := full
	broad.FieldSelectorRequirements, broad.LabelSelectorRequirements = nil, nil
	if len(seen) != 2 || !reflect.DeepEqual(recordOf(seen[0]), broad) || !reflect.DeepEqual(recordOf(seen[1]), full) {
		t.Errorf("asked %#v, want the broad request then the request", seen)
	}
	for _, a := range []authorizer.AttributesRecord{
		{User: u, Verb: "get", Path: "/healthz"},
		{User: u, Verb: "list", Resource: "pods", ResourceRequest: true, LabelSelectorParsingErr: errors.New("bad"),
			LabelSelectorRequirements: labelReqs},
		{User: u, Verb: "list", Resource: "pods", ResourceRequest: true},
	} {
		seen = nil
		_, _, _ = authorizeBroadFirst(record).Authorize(context.Background(), a)
		if len(seen) != 1 || !reflect.DeepEqual(recordOf(seen[0]), a) {
			t.Errorf("%+v: asked %d times", a, len(seen))
		}
	}
}

// TestServersAuthorizerSharesTheReview: the server's own authorizer (from --authorization-kubeconfig) shares one
// review among a namespace's selections.
func TestServersAuthorizerSharesTheReview(t *testing.T) {
	url, reviews := reviewingKubeAPIServer(t, http.StatusOK, rbacLike)
	kubeconfig := filepath.Join(t.TempDir(), "authz.conf")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, url)), 0o600); err != nil {
		t.Fatal(err)
	}
	o := loopbackOptions(t, t.TempDir())
	o.Authorization.RemoteKubeConfigFile = kubeconfig
	cfg, err := o.Config("test")
	if err != nil {
		t.Fatal(err)
	}
	for k := range 20 {
		if d, _, err := cfg.Authorization.Authorizer.Authorize(context.Background(), listWith(t, "apps", fmt.Sprintf("w=%d", k))); d != authorizer.DecisionAllow || err != nil {
			t.Fatalf("list %d: %v, %v", k, d, err)
		}
	}
	if n := reviews.Load(); n != 1 {
		t.Errorf("the server's authorizer made %d reviews for 20 selections of one namespace, want 1", n)
	}
}

// recordOf is what an authorizer reads of a: every attribute, by its getters.
func recordOf(a authorizer.Attributes) authorizer.AttributesRecord {
	fieldReqs, fieldErr := a.GetFieldSelector()
	labelReqs, labelErr := a.GetLabelSelector()
	return authorizer.AttributesRecord{User: a.GetUser(), Verb: a.GetVerb(), Namespace: a.GetNamespace(),
		APIGroup: a.GetAPIGroup(), APIVersion: a.GetAPIVersion(), Resource: a.GetResource(),
		Subresource: a.GetSubresource(), Name: a.GetName(), ResourceRequest: a.IsResourceRequest(), Path: a.GetPath(),
		FieldSelectorRequirements: fieldReqs, FieldSelectorParsingErr: fieldErr,
		LabelSelectorRequirements: labelReqs, LabelSelectorParsingErr: labelErr}
}
