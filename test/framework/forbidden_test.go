package framework

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// checkForbidden reports whether listing namespaces with cfg is answered 403 (true) as opposed to another
// error (retried) or success (a bug: the user has no RBAC).
func checkForbidden(ctx context.Context, cfg *rest.Config) (bool, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, StopPolling(err)
	}
	_, err = c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return true, nil
	case err == nil:
		return false, StopPolling(errors.New("a user without RBAC listed namespaces"))
	default:
		return false, err
	}
}
