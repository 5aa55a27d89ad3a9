package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// overlayWant is what an operator is promised by one overlay, beyond what every overlay promises.
type overlayWant struct {
	service  string // the Service the APIService points at, and the Deployment's name
	source   string // --source
	replicas int32
	ha       bool // PodDisruptionBudget, anti-affinity, topology spread
}

// wants holds every overlay in manifests/overlays: a new overlay without an entry fails TestApplyDryRunServer.
var wants = map[string]overlayWant{
	"kubelet":           {service: "metrics-ring-kubelet", source: "kubelet", replicas: 1},
	"prometheus":        {service: "metrics-ring-prometheus", source: "prometheus", replicas: 1},
	"high-availability": {service: "metrics-ring-kubelet", source: "kubelet", replicas: 2, ha: true},
}

// objects are an overlay's objects as kube-apiserver returned them from the dry run (defaulted and admitted).
type objects struct {
	deployments     []appsv1.Deployment
	services        []corev1.Service
	configMaps      []corev1.ConfigMap
	serviceAccounts []corev1.ServiceAccount
	pdbs            []policyv1.PodDisruptionBudget
	apiServices     []apiregv1.APIService
	secrets         []corev1.Secret
	// ClusterRoles and their bindings: what the ServiceAccount is granted (grants_test.go).
	clusterRoles        []rbacv1.ClusterRole
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	count               int
}

// decodeObjects reads the List `kubectl apply -o json` prints for several objects.
func decodeObjects(out string) (*objects, error) {
	var list struct{ Items []json.RawMessage }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("decoding kubectl's output: %w", err)
	}
	o := &objects{count: len(list.Items)}
	for _, raw := range list.Items {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(raw, &tm); err != nil {
			return nil, fmt.Errorf("decoding an item: %w", err)
		}
		var err error
		switch tm.Kind {
		case "Deployment":
			o.deployments, err = appendDecoded(o.deployments, raw)
		case "Service":
			o.services, err = appendDecoded(o.services, raw)
		case "ConfigMap":
			o.configMaps, err = appendDecoded(o.configMaps, raw)
		case "ServiceAccount":
			o.serviceAccounts, err = appendDecoded(o.serviceAccounts, raw)
		case "PodDisruptionBudget":
			o.pdbs, err = appendDecoded(o.pdbs, raw)
		case "APIService":
			o.apiServices, err = appendDecoded(o.apiServices, raw)
		case "Secret":
			o.secrets, err = appendDecoded(o.secrets, raw)
		case "ClusterRole":
			o.clusterRoles, err = appendDecoded(o.clusterRoles, raw)
		case "ClusterRoleBinding":
			o.clusterRoleBindings, err = appendDecoded(o.clusterRoleBindings, raw)
		}
		if err != nil {
			return nil, fmt.Errorf("decoding a %s: %w", tm.Kind, err)
		}
	}
	return o, nil
}

// checkAPIServices checks that apis are the APIServices of framework.APIServiceNames, each serving its version of
// metrics.k8s.io through one Service, with versionPriority in the order of the names; it returns that Service.
func checkAPIServices(apis []apiregv1.APIService, fail func(string, ...any)) *apiregv1.ServiceReference {
	var ref *apiregv1.ServiceReference
	var prev int32
	for i, name := range framework.APIServiceNames {
		api := findByName(apis, name, func(a apiregv1.APIService) string { return a.Name })
		switch {
		case api == nil:
			fail("no APIService %s", name)
			continue
		case api.Spec.Group != "metrics.k8s.io" || api.Spec.Version != framework.APIServiceVersion(name):
			fail("APIService %s serves %s/%s, want metrics.k8s.io/%s", name, api.Spec.Group, api.Spec.Version, framework.APIServiceVersion(name))
		case i > 0 && api.Spec.VersionPriority >= prev:
			fail("APIService %s has versionPriority %d, want less than %s's %d", name, api.Spec.VersionPriority,
				framework.APIServiceNames[i-1], prev)
		case ref != nil && !reflect.DeepEqual(api.Spec.Service, ref):
			fail("APIService %s points at %+v, %s at %+v: want one Service", name, api.Spec.Service, framework.APIServiceNames[0], ref)
		}
		prev = api.Spec.VersionPriority
		if ref == nil {
			ref = api.Spec.Service
		}
	}
	return ref
}

func appendDecoded[T any](s []T, raw json.RawMessage) ([]T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return append(s, v), err
}

// checkObjects returns everything in o that breaks a promise of w: the APIService reaches the Deployment
// through the Service, the pods run with the secure defaults and the probes, and HA keeps one replica up.
func checkObjects(o *objects, w overlayWant) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(o.apiServices) != len(framework.APIServiceNames) || len(o.deployments) != 1 || len(o.serviceAccounts) != 1 {
		return fmt.Errorf("want %d APIServices (%v), one Deployment and one ServiceAccount; got %d, %d, %d",
			len(framework.APIServiceNames), framework.APIServiceNames, len(o.apiServices), len(o.deployments), len(o.serviceAccounts))
	}
	d := o.deployments[0]
	pod := d.Spec.Template.Spec
	podLabels := labels.Set(d.Spec.Template.Labels)

	// The aggregator's route: APIServices -> Service (name, namespace, port) -> the Deployment's https port. Every
	// version's APIService takes the same route, and the one listed first is preferred (higher versionPriority).
	ref := checkAPIServices(o.apiServices, fail)
	if ref == nil || ref.Name != w.service || ref.Namespace != namespace || ref.Port == nil {
		return errors.Join(append(errs, fmt.Errorf("APIService points at %+v, want %s/%s", ref, namespace, w.service))...)
	}
	svc := findByName(o.services, namespace+"/"+w.service, func(s corev1.Service) string { return s.Namespace + "/" + s.Name })
	if svc == nil {
		return errors.Join(append(errs, fmt.Errorf("no Service %s/%s for the APIService", namespace, w.service))...)
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		fail("Service %s selects %v, not the pods of Deployment %s %v", svc.Name, svc.Spec.Selector, d.Name, podLabels)
	}
	if d.Name != w.service || d.Namespace != namespace {
		fail("Deployment %s/%s, want %s/%s", d.Namespace, d.Name, namespace, w.service)
	}
	if len(pod.Containers) != 1 {
		return errors.Join(append(errs, fmt.Errorf("Deployment %s has %d containers, want 1", d.Name, len(pod.Containers)))...)
	}
	c := pod.Containers[0]
	https := containerPort(c, "https")
	if https == 0 || !slices.Contains(c.Args, fmt.Sprintf("--secure-port=%d", https)) {
		fail("container %s: --secure-port must be its https port %d; args %q", c.Name, https, c.Args)
	}
	svcPort := findByName(svc.Spec.Ports, fmt.Sprint(*ref.Port), func(p corev1.ServicePort) string { return fmt.Sprint(p.Port) })
	if svcPort == nil || resolvePort(c, svcPort.TargetPort) != https {
		fail("Service %s has no port %d to the container's https port: %+v", svc.Name, *ref.Port, svc.Spec.Ports)
	}

	// Identity, scheduling, resources.
	if pod.ServiceAccountName != serviceAccount || o.serviceAccounts[0].Name != serviceAccount {
		fail("pods run as ServiceAccount %q, the overlay creates %q; want %s", pod.ServiceAccountName, o.serviceAccounts[0].Name, serviceAccount)
	}
	if pod.PriorityClassName != "system-cluster-critical" {
		fail("priorityClassName %q, want system-cluster-critical", pod.PriorityClassName)
	}
	if c.Image == "" || c.Image == "metrics-ring" {
		fail("image %q: the overlay's images transformer did not apply", c.Image)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		fail("container %s has no CPU and memory requests: %v", c.Name, c.Resources.Requests)
	}
	if !slices.Contains(c.Args, "--source="+w.source) {
		fail("container %s args %q lack --source=%s", c.Name, c.Args, w.source)
	}
	errs = append(errs, checkSecure(pod, c)...)
	errs = append(errs, checkProbes(c)...)

	// Writable and mounted what the read-only root needs: the self-signed certificate's directory and the
	// Prometheus config.
	if err := mountedFrom(pod, c, argValue(c.Args, "--cert-dir"), func(v corev1.Volume) bool { return v.EmptyDir != nil }); err != nil {
		fail("--cert-dir: %w", err)
	}
	if cfg := argValue(c.Args, "--prometheus-config"); w.source == "prometheus" {
		err := mountedFrom(pod, c, path.Dir(cfg), func(v corev1.Volume) bool {
			if v.ConfigMap == nil {
				return false
			}
			cm := findByName(o.configMaps, v.ConfigMap.Name, func(m corev1.ConfigMap) string { return m.Name })
			return cm != nil && cm.Data[path.Base(cfg)] != ""
		})
		if err != nil {
			fail("--prometheus-config %q is not a key of a ConfigMap of the overlay: %w", cfg, err)
		}
	}

	// Upgrades keep a ready replica and progress on as many nodes as replicas; stopping drains; memory is bounded.
	// HA keeps one replica through voluntary disruptions and spreads the replicas.
	if replicas := ptr.Deref(d.Spec.Replicas, 1); replicas != w.replicas {
		fail("Deployment %s has %d replicas, want %d", d.Name, replicas, w.replicas)
	}
	errs = append(errs, checkRollout(d, pod)...)
	errs = append(errs, checkShutdown(pod, c)...)
	errs = append(errs, checkMemory(c)...)
	if w.ha {
		errs = append(errs, checkHA(o, pod, podLabels)...)
	} else if len(o.pdbs) != 0 {
		fail("a single replica with a PodDisruptionBudget blocks node drains")
	}
	return errors.Join(errs...)
}

// mountedFrom checks that dir is a volume mount of c from a volume of pod that ok accepts.
func mountedFrom(pod corev1.PodSpec, c corev1.Container, dir string, ok func(corev1.Volume) bool) error {
	if dir == "" || dir == "." {
		return errors.New("not set")
	}
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) != path.Clean(dir) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && ok(v) {
				return nil
			}
		}
		return fmt.Errorf("%s is mounted from volume %s of the wrong kind", dir, m.Name)
	}
	return fmt.Errorf("%s is not a volume mount of container %s", dir, c.Name)
}

func argValue(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// resolvePort is the container port p names or numbers, 0 when c has none.
func resolvePort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.String {
		return containerPort(c, p.StrVal)
	}
	for _, cp := range c.Ports {
		if cp.ContainerPort == p.IntVal {
			return cp.ContainerPort
		}
	}
	return 0
}

// findByName returns the first item whose key is name.
func findByName[T any](items []T, name string, key func(T) string) *T {
	for i := range items {
		if key(items[i]) == name {
			return &items[i]
		}
	}
	return nil
}
