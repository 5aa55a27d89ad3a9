package framework

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// UserClient is an uncompressed HTTP client for one user of the cluster: a client certificate of its own for
// user in groups, signed by the cluster's client CA, for the backend's own address (direct, verified for the
// Service's name) or, with b nil, for kube-apiserver (through the aggregator). Either way the server tells the
// user apart from every other, as it would the users behind the aggregator. http2 offers HTTP/2, so that many
// clients sharing this one multiplex one connection as a controller's do; otherwise each request in flight has
// an HTTP/1.1 connection of its own. It is for load benchmarks: timeout bounds each request.
func (cp *ControlPlane) UserClient(b *Backend, user string, groups []string, timeout time.Duration, http2 bool) (*http.Client, error) {
	dir := filepath.Join(cp.Dir, "users")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	kp, err := cp.ClientCA.Issue(dir, user, CertSpec{CommonName: user, Organization: groups})
	if err != nil {
		return nil, err
	}
	if b == nil {
		cfg := restConfig(cp.URL, cp.ServerCA.CertPEM, kp)
		cfg.DisableCompression, cfg.Timeout = true, timeout
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("building HTTP client of user %s: %w", user, err)
		}
		return hc, nil
	}
	hc, err := httpsClient(b.m.ServingCA.CertPEM, kp)
	if err != nil {
		return nil, err
	}
	tr := hc.Transport.(*http.Transport)
	tr.TLSClientConfig.ServerName = b.Service + "." + b.m.Namespace + ".svc"
	tr.DisableCompression, tr.ForceAttemptHTTP2 = true, http2
	tr.MaxIdleConnsPerHost = 100
	hc.Timeout = timeout
	return hc, nil
}

// BindClusterRole binds group to the ClusterRole role (such as "view") in every namespace, under name; a binding
// already there is kept.
func (cp *ControlPlane) BindClusterRole(ctx context.Context, name, group, role string) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
	}
	_, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding group %s to ClusterRole %s: %w", group, role, err)
	}
	return nil
}
