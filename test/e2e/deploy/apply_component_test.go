package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestCertManagerComponent: manifests/components/cert-manager, included with each overlay from a kustomization
// of an operator's own, gives the aggregator a link it verifies, as the chart's tls.type=cert-manager does
// (certManagerTLS): the Certificate covers the name the aggregator checks and lands in the Secret the server
// serves, and cert-manager's cainjector is asked to fill both APIServices' caBundle, which no longer skip
// verification. Everything but cert-manager's objects (no CRDs here) passes the server-side dry run and keeps
// the overlay's promises (checkObjects).
func TestCertManagerComponent(t *testing.T) {
	if env.backendsUp {
		t.Fatal("the metrics-ring backends are already set up: run this test before the others (no -shuffle)")
	}
	ctx := context.Background()
	createRestrictedNamespace(t)
	component := filepath.Join(env.repo, "manifests", "components", "cert-manager")
	for _, o := range overlays(t) {
		t.Run(o, func(t *testing.T) {
			rendered, err := renderWithComponent(ctx, t.TempDir(), filepath.Join(env.repo, "manifests", "overlays", o), component)
			if err != nil {
				t.Fatal(err)
			}
			objs, crds := dryRunWithoutCRDs(t, rendered)
			if err := checkObjects(objs, wants[o]); err != nil {
				t.Fatalf("overlays/%s with the cert-manager component as kube-apiserver would store it:\n%v", o, err)
			}
			if err := certManagerTLS(objs, crds); err != nil {
				t.Fatalf("overlays/%s with the cert-manager component: %v", o, err)
			}
			for _, m := range objs.deployments[0].Spec.Template.Spec.Containers[0].VolumeMounts {
				if m.Name == "serving-cert" && !m.ReadOnly {
					t.Errorf("the serving certificate is mounted writable at %s", m.MountPath)
				}
			}
			dryRunPod(t, objs.deployments[0], nil)
		})
	}
}

// renderWithComponent writes a kustomization into dir that includes overlay and component, as an operator's own
// would (kustomize takes relative paths only), and returns kubectl kustomize's output.
func renderWithComponent(ctx context.Context, dir, overlay, component string) (string, error) {
	rel := func(p string) (string, error) { return filepath.Rel(dir, p) }
	o, err := rel(overlay)
	if err != nil {
		return "", err
	}
	c, err := rel(component)
	if err != nil {
		return "", err
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s]\n", o, c)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return "", fmt.Errorf("writing the kustomization: %w", err)
	}
	return env.cp.KubectlOutput(ctx, "", "kustomize", dir)
}
