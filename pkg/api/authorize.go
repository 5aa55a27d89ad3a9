package api

import (
	"context"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// broadFirst authorizes a request with label or field selectors as the same request without them first, and only
// when that is not allowed, as it is. The delegated authorizer caches SubjectAccessReviews by their whole spec,
// selectors included, so without this every HPA (each selects its own pods) would cost kube-apiserver one review
// for every list it makes, and the slowest part of its lists on a busy server is that review (BENCHMARKS.md).
//
// Selectors only narrow access (KEP-4601: an authorizer may authorize without them, using a wider permission),
// and here they only filter what is returned: a user allowed the whole could filter it himself. So an authorizer
// that denies some selections while allowing the whole is not asked about them; one that allows only some
// selections (as the node authorizer allows a kubelet its own node's pods) still gets the request as it is. A
// user allowed nothing costs two reviews a request where he cost one (the broad one is cached, so distinct
// selectors in one namespace cost one more in all); an error on the broad review is the answer, so a struggling
// kube-apiserver is not asked twice.
type broadFirst struct {
	authorizer.Authorizer
}

// authorizeBroadFirst wraps a (nil when authorization is off: nothing to wrap).
func authorizeBroadFirst(a authorizer.Authorizer) authorizer.Authorizer {
	if a == nil {
		return nil
	}
	return broadFirst{a}
}

func (b broadFirst) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if broad, ok := withoutSelectors(a); ok {
		d, reason, err := b.Authorizer.Authorize(ctx, broad)
		if err != nil || d == authorizer.DecisionAllow {
			return d, reason, err
		}
	}
	return b.Authorizer.Authorize(ctx, a)
}

// ConditionsAwareAuthorize is Authorize's decision: broadFirst is not conditions-aware (the Authorizer interface
// asks such an authorizer to answer so), and a caller that asks this way gets the same one review a namespace.
func (b broadFirst) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(b.Authorize(ctx, a))
}

// EvaluateConditions fails closed, as an authorizer without conditions must: broadFirst never returns any.
func (broadFirst) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// selectorless is a request's attributes without its selectors, every other attribute the request's.
type selectorless struct {
	authorizer.Attributes
}

func (selectorless) GetFieldSelector() (fields.Requirements, error) { return nil, nil }
func (selectorless) GetLabelSelector() (labels.Requirements, error) { return nil, nil }

// withoutSelectors is a resource request's attributes without its selectors; ok is false when it had none (or is
// no resource request), or when a selector did not parse: such a request is authorized as it is, whose failure
// its authorizer reports.
func withoutSelectors(a authorizer.Attributes) (_ authorizer.Attributes, ok bool) {
	if !a.IsResourceRequest() {
		return nil, false
	}
	fieldReqs, fieldErr := a.GetFieldSelector()
	labelReqs, labelErr := a.GetLabelSelector()
	if fieldErr != nil || labelErr != nil || len(fieldReqs)+len(labelReqs) == 0 {
		return nil, false
	}
	return selectorless{a}, true
}
