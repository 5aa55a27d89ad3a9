package deploy

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// TestHelmTLSSecretRenewed: with tls.type=helm, an upgrade reuses the previous release's Secret only while its
// certificate names the Service it is served under and is not due for renewal (DESIGN.md section 5). Changing
// source, or a certificate due for renewal, or a Secret that does not say either (an earlier chart's), gets a new
// one. helm template --dry-run=server looks the Secret up in the cluster as helm upgrade does.
func TestHelmTLSSecretRenewed(t *testing.T) {
	helm, err := framework.EnsureHelm(framework.DefaultCacheDir(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const fullname = "metrics-ring-renew"
	render := func(source string) (*corev1.Secret, *x509.Certificate) {
		t.Helper()
		out, err := run(ctx, helm, "template", releaseName, filepath.Join(env.repo, "manifests", "charts", "metrics-ring"),
			"--namespace", namespace, "--dry-run=server", "--kubeconfig", env.cp.AdminKubeconfig,
			"--set", "tls.type=helm", "--set", "fullnameOverride="+fullname, "--set", "source="+source)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		secret, _, err := secretAndAPIServices(out)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(secret.Data["tls.crt"])
		if block == nil {
			t.Fatalf("the Secret's tls.crt is not PEM: %q", secret.Data["tls.crt"])
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return secret, cert
	}
	secrets := env.cp.Client.CoreV1().Secrets(namespace)
	install := func(s *corev1.Secret) {
		t.Helper()
		_ = secrets.Delete(ctx, s.Name, metav1.DeleteOptions{})
		s.ResourceVersion = ""
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = secrets.Delete(ctx, fullname+"-tls", metav1.DeleteOptions{}) })
	names := func(source string) string { return fmt.Sprintf("%s-%s.%s.svc", fullname, source, namespace) }

	first, cert := render("kubelet")
	if !slices.Contains(cert.DNSNames, names("kubelet")) {
		t.Fatalf("the first certificate names %v, want %s", cert.DNSNames, names("kubelet"))
	}
	install(first)
	if again, _ := render("kubelet"); string(again.Data["tls.crt"]) != string(first.Data["tls.crt"]) {
		t.Error("an upgrade with nothing changed generated a new certificate: want the previous Secret reused")
	}
	if _, moved := render("prometheus"); !slices.Contains(moved.DNSNames, names("prometheus")) {
		t.Errorf("after source changed to prometheus the certificate names %v, want %s (the aggregator would refuse it)",
			moved.DNSNames, names("prometheus"))
	}

	due := first.DeepCopy()
	due.Annotations["metrics-ring.io/tls-renew-after"] = strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
	install(due)
	if renewed, cert := render("kubelet"); string(renewed.Data["tls.crt"]) == string(first.Data["tls.crt"]) ||
		time.Until(cert.NotAfter) < 300*24*time.Hour {
		t.Errorf("a certificate due for renewal was reused (or renewed to expire at %s): want a new one for a year", cert.NotAfter)
	}

	earlier := first.DeepCopy()
	earlier.Annotations = nil
	install(earlier)
	if renewed, _ := render("kubelet"); string(renewed.Data["tls.crt"]) == string(first.Data["tls.crt"]) {
		t.Error("a Secret that does not say what its certificate names was reused: want a new one")
	}
}
