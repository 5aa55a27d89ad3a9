package kubeletsim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// The API side of churn: what the kubelets and controllers of a real cluster write for each Step. The caller
// applies a Step to its sim (and hands it to the other processes serving the cluster) at the point a real
// kubelet would act: a pod's containers stop before its object goes, and start before it turns Running.

// DeletePodObject deletes a pod's object at once (no grace period, as a kubelet confirms a terminated pod's
// deletion); a pod already gone is not an error.
func DeletePodObject(ctx context.Context, c kubernetes.Interface, namespace, name string) error {
	var zero int64
	err := c.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubeletsim: deleting pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// AddPodObject creates the Pod of an OpAdd Step (bound to its node, owned by its workload's ReplicaSet), calls
// apply (which applies the Step: the kubelet starts its containers), then writes it Running and Ready, as a
// kubelet does once they run. When apply fails the object is deleted again.
func (s *Sim) AddPodObject(ctx context.Context, c kubernetes.Interface, st Step, apply func(Step) error) error {
	if st.Op != OpAdd {
		return fmt.Errorf("kubeletsim: AddPodObject of a %q step", st.Op)
	}
	n, err := s.upNode(st.Node)
	if err != nil {
		return err
	}
	p := &pod{namespace: st.Namespace, name: st.Pod, uid: st.UID, node: n, start: st.At, labels: st.Labels}
	for i := range s.cfg.ContainersPerPod {
		p.containers = append(p.containers, &container{name: ContainerName(i), image: "registry.k8s.io/pause:3.10"})
	}
	pods := c.CoreV1().Pods(st.Namespace)
	if _, err := pods.Create(ctx, s.podObject(p), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubeletsim: creating pod %s/%s: %w", st.Namespace, st.Pod, err)
	}
	if err := apply(st); err != nil {
		return fmt.Errorf("%w (pod %s/%s deleted again: %w)", err, st.Namespace, st.Pod,
			DeletePodObject(ctx, c, st.Namespace, st.Pod))
	}
	return s.writePodStatus(ctx, c, st.Namespace, st.Pod)
}

// writePodStatus writes what the sim serves of a pod into its object's status; a pod deleted meanwhile is not
// an error.
func (s *Sim) writePodStatus(ctx context.Context, c kubernetes.Interface, namespace, name string) error {
	p, err := s.lookup(namespace, name)
	if err != nil {
		return nil // removed since (churn runs in parallel)
	}
	pods := c.CoreV1().Pods(namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.setPodStatus(cur, p)
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubeletsim: writing status of pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// RestartPodObject writes an applied OpRestart Step into its pod's status: the container's new start time and
// restart count.
func (s *Sim) RestartPodObject(ctx context.Context, c kubernetes.Interface, st Step) error {
	return s.writePodStatus(ctx, c, st.Namespace, st.Pod)
}

// NodeObject writes an applied OpNodeDown (the Node is deleted) or OpNodeUp (registered again) Step.
func (s *Sim) NodeObject(ctx context.Context, c kubernetes.Interface, st Step) error {
	n, ok := s.byName[st.Node]
	if !ok {
		return fmt.Errorf("kubeletsim: unknown node %q", st.Node)
	}
	switch st.Op {
	case OpNodeDown:
		err := c.CoreV1().Nodes().Delete(ctx, st.Node, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kubeletsim: deleting node %s: %w", st.Node, err)
		}
		return nil
	case OpNodeUp:
		return s.registerNode(ctx, c, n)
	}
	return fmt.Errorf("kubeletsim: NodeObject of a %q step", st.Op)
}
