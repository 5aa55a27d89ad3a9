package kubeletsim

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Workload is a Deployment whose pods the sim serves (Config.WorkloadPods): what an HPA scales.
type Workload struct {
	Namespace, Name string
	Pods            int
}

// workloadLabel is the label whose value names a pod's workload (its Deployment).
const workloadLabel = "workload"

// RegisterWorkloads creates the first n workloads' Deployments, each with one ReplicaSet it owns, in their
// namespaces (created if missing), and has every pod of the workload registered from then on (Register, and
// pods added by churn) owned by that ReplicaSet, as a Deployment's pods are. No controller needs to run: the
// objects only have to exist for an HPA's scale target and for owner references; call it before Register.
func (s *Sim) RegisterWorkloads(ctx context.Context, c kubernetes.Interface, n int) ([]Workload, error) {
	if total := Workloads(s.cfg); n < 0 || n > total {
		return nil, fmt.Errorf("kubeletsim: %d workloads asked, the cluster has %d of %d pods", n, total,
			s.cfg.WorkloadPods)
	}
	out := make([]Workload, n)
	for i := range out {
		ns, _ := WorkloadSelector(s.cfg, i)
		out[i] = Workload{Namespace: ns, Name: workloadValue(i / s.cfg.Namespaces), Pods: s.cfg.WorkloadPods}
	}
	namespaces := s.Namespaces()
	if err := parallel(ctx, "namespaces", len(namespaces), func(ctx context.Context, i int) error {
		return ensureNamespace(ctx, c, namespaces[i])
	}); err != nil {
		return nil, err
	}
	err := parallel(ctx, "workloads", n, func(ctx context.Context, i int) error {
		return s.registerWorkload(ctx, c, out[i])
	})
	return out, err
}

func (s *Sim) registerWorkload(ctx context.Context, c kubernetes.Interface, w Workload) error {
	replicas := int32(w.Pods)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{workloadLabel: w.Name}}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector.MatchLabels}}
	for i := range s.cfg.ContainersPerPod {
		template.Spec.Containers = append(template.Spec.Containers, corev1.Container{Name: ContainerName(i),
			Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
			}}})
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: selector, Template: template}}
	deps := c.AppsV1().Deployments(w.Namespace)
	got, err := deps.Create(ctx, dep, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = deps.Get(ctx, w.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("kubeletsim: registering deployment %s/%s: %w", w.Namespace, w.Name, err)
	}
	yes := true
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-sim", Namespace: w.Namespace,
		Labels: selector.MatchLabels, OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1",
			Kind: "Deployment", Name: got.Name, UID: got.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: selector, Template: template}}
	sets := c.AppsV1().ReplicaSets(w.Namespace)
	gotRS, err := sets.Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		gotRS, err = sets.Get(ctx, rs.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("kubeletsim: registering replica set %s/%s: %w", w.Namespace, rs.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owners == nil {
		s.owners = map[string][]metav1.OwnerReference{}
	}
	s.owners[key(w.Namespace, w.Name)] = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
		Name: gotRS.Name, UID: gotRS.UID, Controller: &yes, BlockOwnerDeletion: &yes}}
	return nil
}

// ownersOf is the owner references of p's Pod object: its workload's ReplicaSet, once registered.
func (s *Sim) ownersOf(p *pod) []metav1.OwnerReference {
	w, ok := p.labels[workloadLabel]
	if !ok {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.owners[key(p.namespace, w)]
}

// WorkloadPodKeys maps each workload ("namespace/name") to its pods ("namespace/name") as served now.
func (s *Sim) WorkloadPodKeys() map[string][]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]string{}
	for k, p := range s.pods {
		if w, ok := p.labels[workloadLabel]; ok {
			out[key(p.namespace, w)] = append(out[key(p.namespace, w)], k)
		}
	}
	return out
}
