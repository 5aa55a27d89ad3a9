package deploy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// metrics-server's own install, for TestMetricsServerDeploymentNewImage: its Service name (which its APIService
// names), on a loopback address of its own.
const (
	metricsServerVersion               = "v0.9.0"
	metricsServerService, metricsSrvIP = "metrics-server", "127.0.0.5"
	metricsServerAccount               = "metrics-server"
)

// TestMetricsServerDeploymentNewImage is the README's third way to install: keep metrics-server v0.9.0's objects
// and change only the image. Its RBAC (from its released kustomize base) is applied for real, and metrics-ring
// runs as its ServiceAccount with its Deployment's container args as released, the one change an operator makes
// for these kubelets aside (their CA); this cluster runs no pods, so the process stands in for the container.
// Then metrics-server's grants are all metrics-ring needs (nothing in its log was forbidden), and a reader bound
// to metrics-server's reader role gets the truth from kubectl top through the APIServices.
func TestMetricsServerDeploymentNewImage(t *testing.T) {
	replicaA(t)
	ctx := context.Background()
	base, err := framework.MetricsServerManifests(metricsServerVersion)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := env.cp.KubectlOutput(ctx, "", "kustomize", base)
	if err != nil {
		t.Fatal(err)
	}
	args, err := deploymentArgs(rendered, "metrics-server")
	if err != nil {
		t.Fatal(err)
	}
	// Its Service and APIService are the framework's (an ExternalName Service on loopback, the APIServices with
	// a caBundle); its Deployment has no node to run on here. Everything else is applied as released, and stays:
	// its reader ClusterRole has the name and rules of manifests/base's, which later tests bind.
	docs, _ := withoutKind(rendered, "APIService")
	docs, _ = withoutKind(docs, "Service")
	docs, _ = withoutKind(docs, "Deployment")
	if _, _, err := env.cp.KubectlStreams(ctx, docs, "", "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + namespace + ":" + metricsServerAccount
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	err = framework.Poll(ctx, "metrics-server's RBAC to take effect", 200*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
		denied, err := allowed(ctx, user, groups, neededGrants)
		if err == nil && len(denied) > 0 {
			err = fmt.Errorf("metrics-server's RBAC does not let %s: %s", user, strings.Join(denied, "; "))
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	token, err := env.cp.KubectlOutput(ctx, "", "create", "token", metricsServerAccount, "-n", namespace, "--duration=1h")
	if err != nil {
		t.Fatal(err)
	}
	kube, err := env.cp.TokenKubeconfig("sa-"+metricsServerAccount, strings.TrimSpace(token))
	if err != nil {
		t.Fatal(err)
	}

	// The container's args as released, but where they name the pod's filesystem and port: --cert-dir is the
	// pod's emptyDir (a folder of the test's here) and --secure-port the port the APIServices dial here.
	resolution := metricResolution(args)
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--cert-dir="):
			args[i] = "--cert-dir=" + t.TempDir()
		case strings.HasPrefix(a, "--secure-port="):
			args[i] = "--secure-port=" + strconv.Itoa(env.api.Port)
		}
	}
	// The kubelets' serving CA: these kubelets' certificates are signed by the simulator's CA, which a cluster
	// would name the same way (or skip with --kubelet-insecure-tls, as many metrics-server installs do).
	args = append(args, "--kubelet-certificate-authority="+env.simCA)
	b := startAside(t, framework.BackendConfig{Service: metricsServerService, IP: metricsSrvIP, Resolution: resolution,
		Args: append(framework.IdentityArgs(kube), args...)})
	if err := b.WaitReady(ctx, 2*time.Minute); err != nil {
		t.Fatalf("metrics-ring with metrics-server's args: %v\n%s", err, b.Proc.Tail(30))
	}
	if err := env.api.ServeFrom(ctx, b, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	// metrics-server's own reader role (system:aggregated-metrics-reader, as released) for a plain user, so that
	// every request needs metrics-ring's delegated authorization as metrics-server's ServiceAccount. Two samples
	// per series at metrics-server's resolution, plus slack for a loaded machine.
	readerSeesTruth(t, "metrics-server-viewer", "kubectl top through metrics-ring run with metrics-server's args to be the truth", 4*resolution+settle)
	if err := forbiddenInLog(b); err != nil {
		t.Fatalf("metrics-ring running as %s with metrics-server's RBAC was denied something:\n%v", user, err)
	}
}

// deploymentArgs returns the args of the named container of the one Deployment in a multi-document YAML stream.
func deploymentArgs(rendered, container string) ([]string, error) {
	for _, d := range strings.Split(rendered, "\n---\n") {
		if !strings.Contains("\n"+d+"\n", "\nkind: Deployment\n") {
			continue
		}
		var dep appsv1.Deployment
		if err := yaml.Unmarshal([]byte(d), &dep); err != nil {
			return nil, fmt.Errorf("decoding the Deployment: %w", err)
		}
		for _, c := range dep.Spec.Template.Spec.Containers {
			if c.Name == container {
				return append([]string(nil), c.Args...), nil
			}
		}
		return nil, fmt.Errorf("Deployment %s has no container %s", dep.Name, container)
	}
	return nil, errors.New("no Deployment in the rendered manifests")
}

// metricResolution is the --metric-resolution among args (metrics-server's default, 60 s, when absent).
func metricResolution(args []string) time.Duration {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--metric-resolution="); ok {
			if d, err := time.ParseDuration(v); err == nil {
				return d
			}
		}
	}
	return time.Minute
}
