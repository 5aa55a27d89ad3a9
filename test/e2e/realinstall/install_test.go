package realinstall

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// serverName is the Deployment and Service both installs make (the chart's release is named metrics-ring).
const serverName = "metrics-ring-kubelet"

// inClusterArgs are the flags both installs add: metrics-ring verifies the kubelet with the cluster's CA, which
// signed its serving certificate (as with serverTLSBootstrap), and leaves the simulated node alone.
var inClusterArgs = []string{
	"--kubelet-certificate-authority=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
	"--node-selector=" + skipLabel + "!=true",
}

// installation is one way of installing metrics-ring: all make the Deployment and Service serverName and the
// two APIServices, so one is taken out before another goes in.
type installation struct {
	name          string
	apply, remove func(ctx context.Context) error
	// replicas is how many pods serve once it is installed (0: one).
	replicas int
}

var current *installation

// ensureInstalled makes in the installation present, taking out the other one first, and waits until it serves.
func ensureInstalled(t *testing.T, in *installation) {
	t.Helper()
	if current == in {
		return
	}
	uninstall(t)
	start := time.Now()
	if err := in.apply(context.Background()); err != nil {
		t.Fatalf("installing the %s: %v", in.name, err)
	}
	current = in
	waitServing(t, max(in.replicas, 1))
	t.Logf("%s: serving through both APIServices %.1f s after it was applied", in.name, time.Since(start).Seconds())
}

// uninstall takes out the current installation, if any, and waits until its pods are gone.
func uninstall(t *testing.T) {
	t.Helper()
	if current == nil {
		return
	}
	if err := current.remove(context.Background()); err != nil {
		t.Fatalf("removing the %s: %v", current.name, err)
	}
	current = nil
	framework.Eventually(t, "the previous installation's pods gone", 2*time.Minute, func(ctx context.Context) error {
		pods, err := serverPods(ctx)
		if err == nil && len(pods) > 0 {
			err = fmt.Errorf("%d pods left", len(pods))
		}
		return err
	})
}

// waitServing waits until the Deployment's rollout is complete and checks what a user would: replicas pods, on
// as many nodes, each running the image built here, Ready (its probes pass) and never restarted, the Service's
// endpoints naming each, and both APIServices Available (the aggregator dials the endpoints).
func waitServing(t *testing.T, replicas int) []corev1.Pod {
	t.Helper()
	ctx := context.Background()
	rolledOut(t)
	pods, err := serverPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != replicas {
		t.Fatalf("want %d pods of %s, have %d", replicas, serverName, len(pods))
	}
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
		if got := p.Spec.Containers[0].Image; got != image {
			t.Errorf("pod %s runs image %s, want %s (the one imported)", p.Name, got, image)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if !cs.Ready || cs.RestartCount != 0 || cs.State.Running == nil {
				t.Errorf("pod %s, container %s: ready %v, restarts %d, state %+v", p.Name, cs.Name, cs.Ready, cs.RestartCount, cs.State)
			}
		}
		framework.Eventually(t, "the Service's endpoints naming the pod "+p.Status.PodIP, time.Minute, func(ctx context.Context) error {
			return endpointsName(ctx, p.Status.PodIP)
		})
	}
	if len(nodes) != replicas {
		t.Errorf("the %d pods run on %d nodes (%v), want one node each", replicas, len(nodes), nodes)
	}
	framework.Eventually(t, "both APIServices Available", 2*time.Minute, apiServicesAvailable)
	return pods
}

// rolledOut waits until `kubectl rollout status` says the Deployment's rollout is complete (kubectl runs a
// minute at most here: each try waits 45 s).
func rolledOut(t *testing.T) {
	t.Helper()
	start := time.Now()
	for {
		out, err := env.cp.Kubectl(context.Background(), "", "-n", systemNamespace, "rollout", "status", "deployment/"+serverName, "--timeout=45s")
		if err == nil {
			return
		}
		if time.Since(start) > 4*time.Minute {
			dumpPods(t)
			t.Fatalf("rollout status: %v\n%s", err, out)
		}
	}
}

// serverPods lists the pods of serverName (the chart's and the overlay's selector both include these labels),
// terminating ones included.
func serverPods(ctx context.Context) ([]corev1.Pod, error) {
	l, err := env.cp.Client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=metrics-ring,app.kubernetes.io/component=kubelet"})
	if err != nil {
		return nil, fmt.Errorf("listing metrics-ring's pods: %w", err)
	}
	return l.Items, nil
}

func endpointsName(ctx context.Context, ip string) error {
	l, err := env.cp.Client.DiscoveryV1().EndpointSlices(systemNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + serverName})
	if err != nil {
		return err
	}
	var have []string
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			ready := e.Conditions.Ready != nil && *e.Conditions.Ready
			have = append(have, fmt.Sprintf("%v ready=%v", e.Addresses, ready))
			if ready && len(e.Addresses) > 0 && e.Addresses[0] == ip {
				return nil
			}
		}
	}
	return fmt.Errorf("endpoints of %s: %v", serverName, have)
}

func apiServicesAvailable(ctx context.Context) error {
	for _, name := range framework.APIServiceNames {
		out, err := env.cp.KubectlOutput(ctx, "", "get", "apiservice", name, "-o",
			`jsonpath={.spec.service.name} {.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].message}`)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(out, serverName+" True") {
			return fmt.Errorf("APIService %s: %s", name, out)
		}
	}
	return nil
}

// dumpPods logs what the pods of serverName went through, for a rollout that did not complete.
func dumpPods(t *testing.T) {
	out, _ := env.cp.KubectlOutput(context.Background(), "", "-n", systemNamespace, "describe", "pods")
	t.Log(out)
	env.node.DumpLogs(os.Stderr, 30)
}

// The chart with tls.type=helm: its own CA and serving certificate, the CA in the APIServices' caBundle.
var chart = &installation{
	name: "Helm chart",
	apply: func(ctx context.Context) error {
		args := []string{"install", "metrics-ring", filepath.Join(env.repo, "manifests", "charts", "metrics-ring"),
			"--namespace", systemNamespace,
			"--set", "tls.type=helm",
			"--set", "image.repository=" + strings.Split(image, ":")[0], "--set", "image.tag=" + strings.Split(image, ":")[1],
			"--set", "image.pullPolicy=Never",
			// metrics-server's suite finds the server's pods by metrics-server's label, as its CI's chart sets it.
			"--set", "podLabels.k8s-app=metrics-server",
			"--set-json", fmt.Sprintf("args=[%q,%q]", inClusterArgs[0], inClusterArgs[1])}
		return helm(ctx, args...)
	},
	remove: func(ctx context.Context) error {
		return helm(ctx, "uninstall", "metrics-ring", "--namespace", systemNamespace, "--wait", "--timeout=2m")
	},
}

func helm(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, env.helm, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.cp.AdminKubeconfig, "HELM_CACHE_HOME="+filepath.Join(env.cp.Dir, "helm"),
		"HELM_CONFIG_HOME="+filepath.Join(env.cp.Dir, "helm"), "HELM_DATA_HOME="+filepath.Join(env.cp.Dir, "helm"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// The kubelet overlay, as a user installs it with their image.
var overlay = kustomized("kubelet", 1)

// kustomized is manifests/overlays/<name> as a user installs it with their image: a kustomization of their own
// naming the overlay, with an images override and the in-cluster flags.
func kustomized(name string, replicas int) *installation {
	return &installation{
		name:     name + " overlay",
		replicas: replicas,
		apply: func(ctx context.Context) error {
			dir, err := overlayDir(name)
			if err == nil {
				_, err = env.cp.KubectlOutput(ctx, "", "apply", "-k", dir)
			}
			return err
		},
		remove: func(ctx context.Context) error {
			dir, err := overlayDir(name)
			if err == nil {
				_, err = env.cp.KubectlOutput(ctx, "", "delete", "-k", dir, "--wait", "--timeout=2m")
			}
			return err
		},
	}
}

// overlayDir writes the user's kustomization of manifests/overlays/<overlay> into the run's folder and returns
// its folder.
func overlayDir(overlay string) (string, error) {
	dir := filepath.Join(env.cp.Dir, "overlay-"+overlay)
	name, tag, _ := strings.Cut(image, ":")
	// kustomize takes a base's folder only relative to the kustomization's.
	base, err := filepath.Rel(dir, filepath.Join(env.repo, "manifests", "overlays", overlay))
	if err != nil {
		return "", fmt.Errorf("the overlay's path: %w", err)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: ghcr.io/metrics-ring/metrics-ring
    newName: %s
    newTag: %s
patches:
  - target: {kind: Deployment, name: %s}
    patch: |
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: %q}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: %q}
`, base, name, tag, serverName, inClusterArgs[0], inClusterArgs[1])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return "", fmt.Errorf("writing the kustomization: %w", err)
	}
	return dir, nil
}
