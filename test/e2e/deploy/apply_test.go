package deploy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// restrictedNamespace enforces the Pod Security Standards' restricted profile: a pod of an overlay's
// Deployment is admitted there, so the overlays run on clusters that enforce it.
const restrictedNamespace = "e2e-restricted"

// TestApplyDryRunServer: every overlay (kubectl apply -k) and every release YAML (kubectl apply -f) is accepted
// by kube-apiserver's server-side dry run, which runs defaulting, validation and admission on every object
// without storing any, and the objects the server returns keep the promises an operator relies on (see
// checkObjects). A pod of each Deployment is admitted in a namespace enforcing the restricted Pod Security
// Standard, with the system-cluster-critical priority resolved by the Priority admission plugin.
func TestApplyDryRunServer(t *testing.T) {
	// The framework's APIService (with a caBundle) and ExternalName Services share the manifests' names, and
	// applying over them is not an install; the other tests create them only when they first need them.
	if env.backendsUp {
		t.Fatal("the metrics-ring backends are already set up: run this test before the others (no -shuffle)")
	}
	ctx := context.Background()
	createRestrictedNamespace(t)
	critical, err := env.cp.Client.SchedulingV1().PriorityClasses().Get(ctx, "system-cluster-critical", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range overlays(t) {
		t.Run(o, func(t *testing.T) {
			want, ok := wants[o]
			if !ok {
				t.Fatalf("manifests/overlays/%s has no expectations: add it to wants in objects_test.go", o)
			}
			dir := filepath.Join(env.repo, "manifests", "overlays", o)
			rendered, err := env.cp.KubectlOutput(ctx, "", "kustomize", dir)
			if err != nil {
				t.Fatal(err)
			}
			count := strings.Count("\n"+rendered, "\napiVersion: ")
			t.Run("kustomize", func(t *testing.T) {
				out, err := env.cp.KubectlOutput(ctx, "", "apply", "-k", dir, "--dry-run=server", "-o", "json")
				if err != nil {
					t.Fatal(err)
				}
				objs, err := decodeObjects(out)
				if err != nil {
					t.Fatal(err)
				}
				if objs.count != count || count == 0 {
					t.Fatalf("the server-side dry run returned %d objects, the overlay renders %d", objs.count, count)
				}
				if err := checkObjects(objs, want); err != nil {
					t.Fatalf("manifests/overlays/%s as kube-apiserver would store it:\n%v", o, err)
				}
				if err := checkGrants(objs, want); err != nil {
					t.Fatalf("manifests/overlays/%s: %v", o, err)
				}
				pod := dryRunPod(t, objs.deployments[0], nil)
				if pod.Spec.Priority == nil || *pod.Spec.Priority != critical.Value {
					t.Fatalf("a pod of %s got priority %v, want system-cluster-critical's %d", pod.Name, pod.Spec.Priority, critical.Value)
				}
				// The control: the namespace does enforce, so the admission above means something.
				escalate := true
				dryRunPod(t, objs.deployments[0], func(c *corev1.Container) { c.SecurityContext.AllowPrivilegeEscalation = &escalate })
			})
			t.Run("release", func(t *testing.T) {
				out, err := env.cp.KubectlOutput(ctx, "", "apply", "-f", filepath.Join(env.repo, releaseFile(o)), "--dry-run=server")
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.Count(out, "(server dry run)"); got != count {
					t.Fatalf("kubectl reported %d objects accepted by the server-side dry run, the overlay renders %d:\n%s", got, count, out)
				}
			})
		})
	}
	// A dry run stores nothing: the cluster still has no metrics-ring Deployment.
	out, err := env.cp.KubectlOutput(ctx, "", "get", "deployments", "-n", namespace, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "metrics-ring") {
		t.Fatalf("a server-side dry run created a Deployment: %s", out)
	}
}

func createRestrictedNamespace(t *testing.T) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: restrictedNamespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	_, err := env.cp.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// dryRunPod creates a pod of d's template in restrictedNamespace with a server-side dry run and returns it as
// the server would store it. With spoil, it changes the container first and expects a Pod Security rejection.
func dryRunPod(t *testing.T, d appsv1.Deployment, spoil func(*corev1.Container)) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-dry-run", Namespace: restrictedNamespace, Labels: d.Spec.Template.Labels},
		Spec:       *d.Spec.Template.Spec.DeepCopy(),
	}
	if spoil != nil {
		spoil(&pod.Spec.Containers[0])
	}
	got, err := env.cp.Client.CoreV1().Pods(restrictedNamespace).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case spoil == nil && err != nil:
		t.Fatalf("a pod of Deployment %s is not admitted in a namespace enforcing the restricted Pod Security Standard: %v", d.Name, err)
	case spoil != nil && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity")):
		t.Fatalf("a pod allowed to escalate privileges: got %v, want a PodSecurity rejection", err)
	}
	return got
}
