package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
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
	reviews := &atomic.Int64{}
	kubeAPIServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sar authorizationv1.SubjectAccessReview
		if r.URL.Path != "/apis/authorization.k8s.io/v1/subjectaccessreviews" || json.NewDecoder(r.Body).Decode(&sar) != nil {
			http.Error(w, "not a SubjectAccessReview", http.StatusBadRequest)
			return
		}
		reviews.Add(1)
		sar.Status.Allowed = allows(sar.Spec)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&sar)
	}))
	t.Cleanup(kubeAPIServer.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: kubeAPIServer.URL})
	if err != nil {
		t.Fatal(err)
	}
	a, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             10 * time.Second, DenyCacheTTL: 10 * time.Second,
		WebhookRetryBackoff: &wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1},
	}.New()
	if err != nil {
		t.Fatal(err)
	}
	return authorizeSelectorsLast(a), reviews
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
