package kubeletsim

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// registerWorkers bounds parallel API calls: enough to hide round trips on loopback without flooding a
// kube-apiserver that shares the machine. The caller raises its client's QPS and Burst.
const registerWorkers = 32

// Register creates the sim's namespaces with their "default" ServiceAccount (no controller creates it here),
// its Nodes (addresses, kubelet port, Ready, capacity) and its Pods (bound to their node, then Running and Ready
// through the status subresource, started 2 h ago). Objects that already exist are updated where the sim owns
// their state (node status and ports change on every Start; pod status), so it can run again after a restart.
// Call it after Start, so the nodes publish their ports, or with a PortBase, where ports are known beforehand.
func (s *Sim) Register(ctx context.Context, c kubernetes.Interface) error {
	s.mu.RLock()
	started := s.server != nil || s.cfg.PortBase > 0
	pods := make([]*pod, 0, len(s.pods))
	for _, p := range s.pods {
		pods = append(pods, p)
	}
	s.mu.RUnlock()
	if !started {
		return errors.New("kubeletsim: Register before Start without a PortBase: node ports are not known yet")
	}
	namespaces := s.Namespaces()
	if err := parallel(ctx, "namespaces", len(namespaces), func(ctx context.Context, i int) error {
		return ensureNamespace(ctx, c, namespaces[i])
	}); err != nil {
		return err
	}
	if err := parallel(ctx, "nodes", len(s.nodes), func(ctx context.Context, i int) error {
		return s.registerNode(ctx, c, s.nodes[i])
	}); err != nil {
		return err
	}
	return parallel(ctx, "pods", len(pods), func(ctx context.Context, i int) error {
		return s.registerPod(ctx, c, pods[i])
	})
}

func ensureNamespace(ctx context.Context, c kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil &&
		!apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubeletsim: creating namespace %s: %w", name, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}}
	if _, err := c.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{}); err != nil &&
		!apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubeletsim: creating service account %s/default: %w", name, err)
	}
	return nil
}

func (s *Sim) registerNode(ctx context.Context, c kubernetes.Interface, n *node) error {
	want := s.nodeObject(n)
	got, err := c.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = c.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("kubeletsim: registering node %s: %w", n.name, err)
	}
	// kube-apiserver keeps a node's status on create, but an existing node has a stale port, and other API
	// servers (or fakes) may drop status on create: write it through /status whenever it differs.
	if got.Status.DaemonEndpoints.KubeletEndpoint.Port == want.Status.DaemonEndpoints.KubeletEndpoint.Port &&
		len(got.Status.Addresses) > 0 && len(got.Status.Conditions) > 0 {
		return nil
	}
	got.Status = want.Status
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kubeletsim: writing status of node %s: %w", n.name, err)
	}
	return nil
}

func (s *Sim) registerPod(ctx context.Context, c kubernetes.Interface, p *pod) error {
	obj := s.podObject(p)
	got, err := c.CoreV1().Pods(p.namespace).Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = c.CoreV1().Pods(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("kubeletsim: registering pod %s/%s: %w", p.namespace, p.name, err)
	}
	s.setPodStatus(got, p)
	if _, err := c.CoreV1().Pods(p.namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kubeletsim: writing status of pod %s/%s: %w", p.namespace, p.name, err)
	}
	return nil
}

// parallel runs fn for 0..total-1 on bounded workers, stops at the first error and logs progress every few
// seconds, so registering thousands of objects is neither slow nor silent.
func parallel(ctx context.Context, what string, total int, fn func(context.Context, int) error) error {
	if total == 0 {
		return nil
	}
	var done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(registerWorkers)
	stop := make(chan struct{})
	go func() {
		start := time.Now()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				klog.InfoS("kubeletsim: registering", "kind", what, "done", done.Load(), "total", total,
					"elapsed", time.Since(start).Round(time.Second))
			}
		}
	}()
	defer close(stop)
	for i := range total {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := fn(gctx, i); err != nil {
				return err
			}
			done.Add(1)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kubeletsim: registering %s: %w", what, err)
	}
	return nil
}
