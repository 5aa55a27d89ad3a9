package deploy

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// The release is named metrics-ring in kube-system, so the chart's objects have the overlays' names and
// checkObjects holds them to the overlays' promises.
const releaseName = "metrics-ring"

// chartCase is one set of values and what the rendered chart must then be.
type chartCase struct {
	name string
	set  []string // helm --set
	want overlayWant
	tls  func(o *objects, crds []crdObject) error // the aggregator's trust in the serving certificate
	more func(o *objects) error                   // nil, or what else these values promise
}

var chartCases = []chartCase{
	{name: "default", want: wants["kubelet"], tls: selfSignedTLS},
	{name: "tls.type=helm", set: []string{"tls.type=helm"}, want: wants["kubelet"], tls: helmTLS},
	{name: "tls.type=cert-manager", set: []string{"tls.type=cert-manager"}, want: wants["kubelet"], tls: certManagerTLS},
	{name: "source=prometheus", set: []string{"source=prometheus"}, want: wants["prometheus"], tls: selfSignedTLS},
	{name: "source=prometheus with basic auth", want: wants["prometheus"], tls: selfSignedTLS, more: basicAuthFromSecret,
		set: []string{"source=prometheus", "prometheus.basicAuth.username=adapter", "prometheus.basicAuth.existingSecret=prom-auth"}},
	{name: "high-availability", want: wants["high-availability"], tls: selfSignedTLS, set: []string{
		"replicas=2", "podDisruptionBudget.enabled=true", "podAntiAffinityPreset=required",
		"topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
		"topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
	}},
}

// TestHelmChart: manifests/charts/metrics-ring passes helm lint, and for each chartCase its `helm template` is
// accepted by kube-apiserver's server-side dry run, keeps the overlays' promises (checkObjects: locked-down
// pods, probes, rollout, GOMEMLIMIT, the APIServices' route), and its pod is admitted under the restricted Pod
// Security Standard. cert-manager's CRDs are not installed here, so its Certificate and Issuer are checked as
// rendered and everything else is dry-run. No pod runs in this cluster (no kubelet, no scheduler), so no
// install here serves kubectl top; TestKubectlTop* cover serving through the same ServiceAccount and RBAC.
func TestHelmChart(t *testing.T) {
	if env.backendsUp {
		t.Fatal("the metrics-ring backends are already set up: run this test before the others (no -shuffle)")
	}
	helm, err := framework.EnsureHelm(framework.DefaultCacheDir(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(env.repo, "manifests", "charts", "metrics-ring")
	ctx := context.Background()
	t.Run("lint", func(t *testing.T) {
		if out, err := run(ctx, helm, "lint", "--strict", chart); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	})
	createRestrictedNamespace(t)
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", releaseName, chart, "--namespace", namespace}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			rendered, err := run(ctx, helm, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, rendered)
			}
			objs, crds := dryRunWithoutCRDs(t, rendered)
			if err := checkObjects(objs, tc.want); err != nil {
				t.Fatalf("the chart with %v as kube-apiserver would store it:\n%v", tc.set, err)
			}
			if err := tc.tls(objs, crds); err != nil {
				t.Fatalf("the chart with %v: %v", tc.set, err)
			}
			if err := checkGrants(objs, tc.want); err != nil {
				t.Fatalf("the chart with %v: %v", tc.set, err)
			}
			if tc.more != nil {
				if err := tc.more(objs); err != nil {
					t.Fatalf("the chart with %v: %v", tc.set, err)
				}
			}
			dryRunPod(t, objs.deployments[0], nil)
		})
	}
	t.Run("bad values", func(t *testing.T) {
		for _, set := range []string{"source=kubelets", "tls.type=selfsigned", "tls.type=existingSecret",
			"prometheus.basicAuth.existingSecret=prom-auth,source=prometheus"} {
			out, err := run(ctx, helm, "template", releaseName, chart, "--namespace", namespace, "--set", set)
			if err == nil || !strings.Contains(out, strings.SplitN(set, "=", 2)[0]) {
				t.Errorf("--set %s: want an error naming the value, got %v\n%.400s", set, err, out)
			}
		}
	})
}

// dryRunWithoutCRDs dry-runs a rendered stream server-side, all but its cert-manager objects (no CRDs here),
// and returns the objects as kube-apiserver would store them, with the cert-manager objects as rendered.
func dryRunWithoutCRDs(t *testing.T, rendered string) (*objects, []crdObject) {
	t.Helper()
	docs, crds, err := splitCRDObjects(rendered)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := env.cp.KubectlStreams(context.Background(), docs, "", "apply", "-f", "-", "--dry-run=server", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Count("\n"+docs, "\napiVersion: "); objs.count != want {
		t.Fatalf("the server-side dry run returned %d objects, the stream renders %d", objs.count, want)
	}
	return objs, crds
}

// crdObject is a rendered object of a kind kube-apiserver here does not know (cert-manager's).
type crdObject struct {
	APIVersion, Kind string
	Metadata         struct{ Name, Namespace string }
	Spec             map[string]any
}

// splitCRDObjects separates the cert-manager.io objects from the rest of a helm template stream.
func splitCRDObjects(rendered string) (docs string, crds []crdObject, err error) {
	var keep []string
	for _, d := range strings.Split(rendered, "\n---\n") {
		if !strings.Contains("\n"+d, "\napiVersion: cert-manager.io/") { // kustomize starts a document with apiVersion
			keep = append(keep, d)
			continue
		}
		var o crdObject
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			return "", nil, fmt.Errorf("decoding %q: %w", d, err)
		}
		crds = append(crds, o)
	}
	return strings.Join(keep, "\n---\n"), crds, nil
}

// selfSignedTLS: the server's own certificate cannot be verified, so the aggregator must skip verification.
func selfSignedTLS(o *objects, crds []crdObject) error {
	for _, a := range o.apiServices {
		if !a.Spec.InsecureSkipTLSVerify || len(a.Spec.CABundle) != 0 {
			return fmt.Errorf("APIService %s: insecureSkipTLSVerify %v with caBundle of %d bytes; a self-signed server needs the skip",
				a.Name, a.Spec.InsecureSkipTLSVerify, len(a.Spec.CABundle))
		}
	}
	return nil
}

// helmTLS: the chart's Secret holds a CA and a serving certificate it signed for the Service's DNS name (the
// name the aggregator verifies), the server serves that certificate, and both APIServices carry the CA and verify.
func helmTLS(o *objects, _ []crdObject) error {
	if len(o.secrets) != 1 {
		return fmt.Errorf("%d Secrets, want the serving certificate's", len(o.secrets))
	}
	s := o.secrets[0]
	var errs []error
	if err := servesSecret(o, s.Name); err != nil {
		errs = append(errs, err)
	}
	ca := s.Data["ca.crt"]
	for _, a := range o.apiServices {
		if a.Spec.InsecureSkipTLSVerify || !bytes.Equal(a.Spec.CABundle, ca) || len(ca) == 0 {
			errs = append(errs, fmt.Errorf("APIService %s: insecureSkipTLSVerify %v, caBundle equal to Secret %s's ca.crt: %v",
				a.Name, a.Spec.InsecureSkipTLSVerify, s.Name, bytes.Equal(a.Spec.CABundle, ca)))
		}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return errors.Join(append(errs, fmt.Errorf("Secret %s ca.crt holds no PEM certificate", s.Name))...)
	}
	block, _ := pem.Decode(s.Data["tls.crt"])
	if block == nil {
		return errors.Join(append(errs, fmt.Errorf("Secret %s tls.crt holds no PEM certificate", s.Name))...)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("Secret %s tls.crt: %w", s.Name, err))...)
	}
	host := aggregatorServerName(o.apiServices[0])
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		errs = append(errs, fmt.Errorf("the serving certificate does not verify as %s against the caBundle: %w", host, err))
	}
	return errors.Join(errs...)
}

// certManagerTLS: cert-manager issues the serving certificate into the Secret the server reads, for the name the
// aggregator verifies, and its cainjector fills both APIServices' caBundle from that Certificate.
func certManagerTLS(o *objects, crds []crdObject) error {
	var cert, issuer *crdObject
	for i := range crds {
		switch crds[i].Kind {
		case "Certificate":
			cert = &crds[i]
		case "Issuer":
			issuer = &crds[i]
		}
	}
	if cert == nil || issuer == nil {
		return fmt.Errorf("want a cert-manager Certificate and Issuer, got %+v", crds)
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	secret, _ := cert.Spec["secretName"].(string)
	if err := servesSecret(o, secret); err != nil {
		fail("Certificate's secretName %q: %w", secret, err)
	}
	host := aggregatorServerName(o.apiServices[0])
	dnsNames, _ := cert.Spec["dnsNames"].([]any)
	if !slices.Contains(dnsNames, any(host)) {
		fail("Certificate dnsNames %v lack %s, the name the aggregator verifies", dnsNames, host)
	}
	ref, _ := cert.Spec["issuerRef"].(map[string]any)
	if ref["name"] != issuer.Metadata.Name || ref["kind"] != "Issuer" || cert.Metadata.Namespace != namespace || issuer.Metadata.Namespace != namespace {
		fail("Certificate %s/%s issuerRef %v, want Issuer %s/%s", cert.Metadata.Namespace, cert.Metadata.Name, ref, issuer.Metadata.Namespace, issuer.Metadata.Name)
	}
	for _, a := range o.apiServices {
		if got, want := a.Annotations["cert-manager.io/inject-ca-from"], namespace+"/"+cert.Metadata.Name; got != want || a.Spec.InsecureSkipTLSVerify {
			fail("APIService %s: cert-manager.io/inject-ca-from %q (want %q), insecureSkipTLSVerify %v", a.Name, got, want, a.Spec.InsecureSkipTLSVerify)
		}
	}
	return errors.Join(errs...)
}

// servesSecret checks the server's --tls-cert-file and --tls-private-key-file come from Secret name.
func servesSecret(o *objects, name string) error {
	pod := o.deployments[0].Spec.Template.Spec
	c := pod.Containers[0]
	for _, flag := range []string{"--tls-cert-file", "--tls-private-key-file"} {
		file := argValue(c.Args, flag)
		if err := mountedFrom(pod, c, filepath.Dir(file), func(v corev1.Volume) bool {
			return v.Secret != nil && v.Secret.SecretName == name
		}); err != nil {
			return fmt.Errorf("%s=%q is not from Secret %s: %w", flag, file, name, err)
		}
	}
	return nil
}

// aggregatorServerName is the name kube-apiserver verifies a backend's certificate for: <service>.<namespace>.svc.
func aggregatorServerName(a apiregv1.APIService) string {
	return a.Spec.Service.Name + "." + a.Spec.Service.Namespace + ".svc"
}

// run runs a program, bounded, and returns its combined output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", filepath.Base(name), strings.Join(args, " "), err)
	}
	return string(out), nil
}
