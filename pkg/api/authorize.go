package api

import (
	"context"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// selectorsLast authorizes a request with label or field selectors as the same request without them first, and
// only when that is not allowed, as it is. A selector narrows what a request may return: a user allowed to list
// every PodMetrics of a namespace gets no more by a selection of them, and could filter the whole list himself.
// The delegated authorizer caches SubjectAccessReviews by their whole spec, selectors included, so without this
// every HPA (each selects its own pods) made one review in kube-apiserver for every list it made: 2,000 HPAs
// made 133 reviews a second, the slowest part of their lists when the server was busy (the attack's runtime trace:
// the slowest HPA lists waited on them). Authorizers that allow only some selections (as the node authorizer
// allows a kubelet its own node's pods) still get the request as it is.
type selectorsLast struct {
	authorizer.Authorizer
}

// authorizeSelectorsLast wraps a (nil when authorization is off: nothing to wrap).
func authorizeSelectorsLast(a authorizer.Authorizer) authorizer.Authorizer {
	if a == nil {
		return nil
	}
	return selectorsLast{a}
}

func (s selectorsLast) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if broad, ok := withoutSelectors(a); ok {
		if d, reason, err := s.Authorizer.Authorize(ctx, broad); err == nil && d == authorizer.DecisionAllow {
			return d, reason, nil
		}
	}
	return s.Authorizer.Authorize(ctx, a)
}

// withoutSelectors is a resource request's attributes without its selectors; ok is false when it had none (or is
// no resource request), or when a selector did not parse: such a request is authorized as it is, whose failure
// its authorizer reports.
func withoutSelectors(a authorizer.Attributes) (_ authorizer.AttributesRecord, ok bool) {
	if !a.IsResourceRequest() {
		return authorizer.AttributesRecord{}, false
	}
	fieldReqs, fieldErr := a.GetFieldSelector()
	labelReqs, labelErr := a.GetLabelSelector()
	if fieldErr != nil || labelErr != nil || len(fieldReqs)+len(labelReqs) == 0 {
		return authorizer.AttributesRecord{}, false
	}
	return authorizer.AttributesRecord{
		User: a.GetUser(), Verb: a.GetVerb(), Namespace: a.GetNamespace(), APIGroup: a.GetAPIGroup(),
		APIVersion: a.GetAPIVersion(), Resource: a.GetResource(), Subresource: a.GetSubresource(), Name: a.GetName(),
		ResourceRequest: true, Path: a.GetPath(),
	}, true
}
