package api

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

const (
	fieldName      = "metadata.name"
	fieldNamespace = "metadata.namespace"
)

// selectors is the parsed, validated selection of one list request.
type selectors struct {
	labels labels.Selector
	fields fields.Selector // nil matches everything
}

// listSelectors validates a list request's selectors. Only metadata.name (and metadata.namespace when namespaced)
// can be selected on: anything else would silently match nothing or everything, so it is a 400 naming the field.
func listSelectors(opts *metainternalversion.ListOptions, namespaced bool) (selectors, error) {
	s := selectors{labels: labels.Everything()}
	if opts == nil {
		return s, nil
	}
	if opts.LabelSelector != nil {
		s.labels = opts.LabelSelector
	}
	if opts.FieldSelector == nil || opts.FieldSelector.Empty() {
		return s, nil
	}
	supported := []string{fieldName}
	if namespaced {
		supported = append(supported, fieldNamespace)
	}
	for _, r := range opts.FieldSelector.Requirements() {
		if !slices.Contains(supported, r.Field) {
			return s, apierrors.NewBadRequest(fmt.Sprintf("field selector %q: field %q is not supported, only %s",
				opts.FieldSelector.String(), r.Field, strings.Join(supported, " and ")))
		}
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals, selection.NotEquals:
		default:
			return s, apierrors.NewBadRequest(fmt.Sprintf("field selector %q: operator %q is not supported for %q",
				opts.FieldSelector.String(), r.Operator, r.Field))
		}
	}
	s.fields = opts.FieldSelector
	return s, nil
}

// matchFields reports whether an object with this namespace and name passes the field selector.
func (s selectors) matchFields(namespace, name string) bool {
	if s.fields == nil {
		return true
	}
	set := fields.Set{fieldName: name}
	if namespace != "" {
		set[fieldNamespace] = namespace
	}
	return s.fields.Matches(set)
}
