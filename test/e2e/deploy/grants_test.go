package deploy

import (
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
)

// checkGrants checks what the overlay's ClusterRoles grant its ServiceAccount: the kubelet source may read the
// kubelets' metrics (nodes/metrics), the Prometheus source reads no kubelet and gets no such grant (DESIGN.md
// section 5), and both list and watch nodes and pods.
func checkGrants(o *objects, w overlayWant) error {
	var rules []rbacv1.PolicyRule
	for _, b := range o.clusterRoleBindings {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Namespace == namespace && s.Name == serviceAccount
		}) {
			continue
		}
		// Roles the overlay does not create (system:auth-delegator) are the cluster's.
		if r := findByName(o.clusterRoles, b.RoleRef.Name, func(r rbacv1.ClusterRole) string { return r.Name }); r != nil {
			rules = append(rules, r.Rules...)
		}
	}
	grants := func(verb, resource string) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, "") && (slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
				(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*"))
		})
	}
	for _, need := range [][2]string{{"list", "nodes"}, {"watch", "nodes"}, {"list", "pods"}, {"watch", "pods"}} {
		if !grants(need[0], need[1]) {
			return fmt.Errorf("the ServiceAccount may not %s %s: rules %+v", need[0], need[1], rules)
		}
	}
	if kubelet := w.source == "kubelet"; grants("get", "nodes/metrics") != kubelet {
		return fmt.Errorf("--source=%s: the ServiceAccount may get nodes/metrics: %v, want %v (rules %+v)", w.source, !kubelet, kubelet, rules)
	}
	return nil
}

// basicAuthFromSecret checks the chart's prometheus.basicAuth: the user name and a password file as flags, the
// file from the Secret, and no password anywhere in the Deployment.
func basicAuthFromSecret(o *objects) error {
	c := o.deployments[0].Spec.Template.Spec.Containers[0]
	file := argValue(c.Args, "--prometheus-basic-auth-password-file")
	if argValue(c.Args, "--prometheus-basic-auth-username") != "adapter" || file == "" {
		return fmt.Errorf("args %q: want --prometheus-basic-auth-username=adapter and a password file", c.Args)
	}
	for _, m := range c.VolumeMounts {
		for _, v := range o.deployments[0].Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == "prom-auth" &&
				len(v.Secret.Items) == 1 && m.MountPath+"/"+v.Secret.Items[0].Path == file {
				return nil
			}
		}
	}
	return fmt.Errorf("no volume of Secret prom-auth mounted at %s", file)
}
