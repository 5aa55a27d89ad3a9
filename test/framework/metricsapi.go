package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
)

// MetricsAPI is the cluster side of metrics-ring: its identity and RBAC, the serving CA that goes into the
// APIServices' caBundle, and the APIServices themselves (v1 and v1beta1, as manifests/base registers them). Backends (one per source) share one port, each on its
// own loopback address behind its own ExternalName Service, so switching the APIService's service name
// switches backends exactly as in a cluster.
type MetricsAPI struct {
	cp        *ControlPlane
	Namespace string
	Port      int
	// ServingCA signs every backend's serving certificate; its PEM is the APIService caBundle.
	ServingCA *CA
	// Kubeconfig is metrics-ring's own identity (user "metrics-ring").
	Kubeconfig string
	agg        aggregator.Interface
}

// MetricsRingUser is the client-certificate user metrics-ring runs as.
const MetricsRingUser = "metrics-ring"

// APIServiceNames are the APIServices metrics-ring serves, one per version of metrics.k8s.io, preferred first;
// manifests/base registers the same.
var APIServiceNames = []string{"v1.metrics.k8s.io", "v1beta1.metrics.k8s.io"}

// APIServiceVersion is the version of metrics.k8s.io an APIService of APIServiceNames registers.
func APIServiceVersion(name string) string { return strings.TrimSuffix(name, ".metrics.k8s.io") }

// SetupMetricsAPI creates metrics-ring's identity, its RBAC and the aggregated reader role, and picks the
// backends' shared port (free on 127.0.0.2-127.0.0.4: kubelet, prometheus, and a spare for tests).
func (cp *ControlPlane) SetupMetricsAPI(ctx context.Context) (*MetricsAPI, error) {
	dir := filepath.Join(cp.Dir, "metrics-ring")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	m := &MetricsAPI{cp: cp, Namespace: "kube-system"}
	var err error
	if m.Port, err = FreePort("127.0.0.2", "127.0.0.3", "127.0.0.4"); err != nil {
		return nil, err
	}
	if m.ServingCA, err = NewCA(dir, "metrics-ring-serving-ca"); err != nil {
		return nil, err
	}
	if m.Kubeconfig, _, err = cp.UserKubeconfig(MetricsRingUser); err != nil {
		return nil, err
	}
	if m.agg, err = aggregator.NewForConfig(cp.Config); err != nil {
		return nil, fmt.Errorf("building aggregator client: %w", err)
	}
	if err := m.createRBAC(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// createRBAC mirrors the manifests an operator applies (metrics-server's, with our names).
func (m *MetricsAPI) createRBAC(ctx context.Context) error {
	rbac := m.cp.Client.RbacV1()
	user := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: MetricsRingUser}}
	verbs := []string{"get", "list", "watch"}
	roles := []*rbacv1.ClusterRole{{
		ObjectMeta: metav1.ObjectMeta{Name: "system:metrics-ring"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: verbs},
		},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "system:aggregated-metrics-reader", Labels: map[string]string{
			"rbac.authorization.k8s.io/aggregate-to-view":  "true",
			"rbac.authorization.k8s.io/aggregate-to-edit":  "true",
			"rbac.authorization.k8s.io/aggregate-to-admin": "true",
		}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods", "nodes"}, Verbs: verbs}},
	}}
	for _, r := range roles {
		if _, err := rbac.ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRole %s: %w", r.Name, err)
		}
	}
	bindings := []*rbacv1.ClusterRoleBinding{{
		ObjectMeta: metav1.ObjectMeta{Name: "system:metrics-ring"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:metrics-ring"},
		Subjects:   user,
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-ring:system:auth-delegator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   user,
	}}
	for _, b := range bindings {
		if _, err := rbac.ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-ring-auth-reader", Namespace: "kube-system"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects:   user,
	}
	if _, err := rbac.RoleBindings("kube-system").Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating RoleBinding %s: %w", rb.Name, err)
	}
	return nil
}

// createService creates the ExternalName Service through which the aggregator reaches a backend: with
// --enable-aggregator-routing=false it dials externalName at the APIService's port.
func (m *MetricsAPI) createService(ctx context.Context, name, ip string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "metrics-ring"}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeExternalName, ExternalName: ip,
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(m.Port)}},
		},
	}
	if _, err := m.cp.Client.CoreV1().Services(m.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Service %s/%s: %w", m.Namespace, name, err)
	}
	return nil
}

// PointAPIService creates the APIServices of APIServiceNames for service (v1 with the higher versionPriority), or
// switches the existing ones to it (the one-command backend swap of the README, done with a merge patch like
// kubectl patch would).
func (m *MetricsAPI) PointAPIService(ctx context.Context, service string) error {
	port := int32(m.Port)
	svcs := m.agg.ApiregistrationV1().APIServices()
	for i, name := range APIServiceNames {
		api := &apiregv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiregv1.APIServiceSpec{
				Service:              &apiregv1.ServiceReference{Namespace: m.Namespace, Name: service, Port: &port},
				Group:                "metrics.k8s.io",
				Version:              APIServiceVersion(name),
				CABundle:             m.ServingCA.CertPEM,
				GroupPriorityMinimum: 100,
				VersionPriority:      int32(100 * (len(APIServiceNames) - i)), // preferred first: 200, 100
			},
		}
		_, err := svcs.Create(ctx, api, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			patch := fmt.Sprintf(`{"spec":{"service":{"name":%q}}}`, service)
			_, err = svcs.Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
		}
		if err != nil {
			return fmt.Errorf("pointing APIService %s at %s: %w", name, service, err)
		}
	}
	return nil
}

// DeleteAPIService deletes the APIService name, if it exists: a backend that does not serve its version (metrics-server
// serves v1beta1 alone) would leave it unavailable, and clients preferring it (kubectl top) failing.
func (m *MetricsAPI) DeleteAPIService(ctx context.Context, name string) error {
	err := m.agg.ApiregistrationV1().APIServices().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting APIService %s: %w", name, err)
	}
	return nil
}

// APIServiceAvailable reports whether every APIService of APIServiceNames is Available, and else the first one's
// condition that is not (name, reason and message).
func (m *MetricsAPI) APIServiceAvailable(ctx context.Context) (bool, string, error) {
	return m.apiServicesAvailable(ctx, APIServiceNames)
}

func (m *MetricsAPI) apiServicesAvailable(ctx context.Context, names []string) (bool, string, error) {
	for _, name := range names {
		api, err := m.agg.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", fmt.Errorf("getting APIService %s: %w", name, err)
		}
		ok, msg := false, "no Available condition yet"
		for _, c := range api.Status.Conditions {
			if c.Type == apiregv1.Available {
				ok, msg = c.Status == apiregv1.ConditionTrue, c.Reason+": "+c.Message
			}
		}
		if !ok {
			return false, name + ": " + msg, nil
		}
	}
	return true, "", nil
}
