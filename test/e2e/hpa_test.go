package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

const (
	hpaNamespace   = "hpa-e2e"
	hpaTarget      = 50               // percent of the CPU request
	hpaRequestNano = 100_000_000      // 100m per pod
	hpaMemory      = uint64(64 << 20) // working set of every pod
	hpaMaxReplicas = 10
)

// adopter plays kubelet for the Deployment's pods: it binds each new pod to a simulated node (Sim.AddPod),
// finishes deletions as a kubelet would, and spreads a total CPU load evenly over the live pods, like a
// Service balancing requests.
type adopter struct {
	mu      sync.Mutex
	total   float64 // cores over all pods
	adopted map[string]bool
	next    int
}

func (a *adopter) setTotal(cores float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.total = cores
}

// sync reconciles once; the test calls it on a ticker until it ends.
func (a *adopter) sync(ctx context.Context) error {
	c := env.cp.Client
	pods, err := c.CoreV1().Pods(hpaNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	live := map[string]bool{}
	nodes := env.sim.Nodes()
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			env.sim.RemovePod(hpaNamespace, p.Name)
			delete(a.adopted, p.Name)
			if err := c.CoreV1().Pods(hpaNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				return fmt.Errorf("finishing deletion of %s: %w", p.Name, err)
			}
			continue
		}
		live[p.Name] = true
		if !a.adopted[p.Name] {
			node := nodes[a.next%len(nodes)]
			a.next++
			if err := env.sim.AddPod(ctx, c, node, p, 0, hpaMemory); err != nil {
				return fmt.Errorf("adopting %s on %s: %w", p.Name, node, err)
			}
			a.adopted[p.Name] = true
		}
	}
	for name := range a.adopted {
		if !live[name] {
			env.sim.RemovePod(hpaNamespace, name)
			delete(a.adopted, name)
		}
	}
	for name := range a.adopted {
		if err := env.sim.SetPod(hpaNamespace, name, a.total/float64(len(a.adopted)), hpaMemory); err != nil {
			return fmt.Errorf("setting load of %s: %w", name, err)
		}
	}
	return nil
}

// impliedReplicas is what the truth implies for the HPA: the pods' summed CPU over the per-pod target
// (request x target utilization), rounded up and clamped to the HPA's bounds.
func impliedReplicas() (int32, uint64) {
	var sum uint64
	for key, containers := range env.sim.Truth().Pods {
		if len(key) > len(hpaNamespace) && key[:len(hpaNamespace)+1] == hpaNamespace+"/" {
			for _, u := range containers {
				sum += u.CPUNanoCores
			}
		}
	}
	perPod := uint64(hpaRequestNano * hpaTarget / 100)
	n := int32((sum + perPod - 1) / perPod)
	return min(max(n, 1), hpaMaxReplicas), sum
}

func TestHPAScalesDeploymentOnCPU(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := env.cp.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	c := env.cp.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hpaNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: hpaNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: *resource.NewScaledQuantity(hpaRequestNano, resource.Nano),
					}},
				}}},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(hpaNamespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: hpaNamespace},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    hpaMaxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
					Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](hpaTarget),
				}},
			}},
			// No stabilization either way, so the test need not wait the default five minutes.
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
			},
		},
	}
	if _, err := c.AutoscalingV2().HorizontalPodAutoscalers(hpaNamespace).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	a := &adopter{adopted: map[string]bool{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := a.sync(ctx); err != nil && ctx.Err() == nil {
				t.Logf("adopter: %v", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		deleteWorkload(t, a)
	})

	// 230m over pods asking 100m at a 50% target implies ceil(230/50) = 5 replicas; 30m implies 1. Neither is
	// near a rounding boundary, so a 1% measurement error cannot change the answer.
	for _, load := range []float64{0.23, 0.03} {
		a.setTotal(load)
		if err := a.sync(ctx); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, fmt.Sprintf("the HPA to scale web to what %.2f cores imply", load), 4*time.Minute, func(ctx context.Context) error {
			want, sum := impliedReplicas()
			if !framework.WithinPercent(int64(sum), int64(load*1e9), 1) {
				return fmt.Errorf("the pods' truth sums to %dn, not yet the %.2f cores set", sum, load)
			}
			d, err := c.AppsV1().Deployments(hpaNamespace).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			h, err := c.AutoscalingV2().HorizontalPodAutoscalers(hpaNamespace).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if sum == 0 || d.Spec.Replicas == nil || *d.Spec.Replicas != want || h.Status.CurrentReplicas != want || d.Status.ReadyReplicas != want {
				return fmt.Errorf("truth: %dn over the pods implies %d replicas; deployment wants %v (ready %d), HPA current %d desired %d, conditions %v",
					sum, want, ptr.Deref(d.Spec.Replicas, -1), d.Status.ReadyReplicas, h.Status.CurrentReplicas, h.Status.DesiredReplicas, h.Status.Conditions)
			}
			return hpaAgreesWithTruthAndTop(ctx, h, sum, want)
		})
		want, _ := impliedReplicas()
		t.Logf("%.2f cores: scaled to %d replicas", load, want)
	}
}

// hpaAgreesWithTruthAndTop compares the HPA's status.currentMetrics (what it read from the metrics API) with the
// truth, and `kubectl top pods` with both: the average CPU per pod within 2 % of the truth's, and kubectl top's sum
// within 2 % plus its rounding (kubectl rounds each pod up to a whole millicore).
func hpaAgreesWithTruthAndTop(ctx context.Context, h *autoscalingv2.HorizontalPodAutoscaler, sum uint64, replicas int32) error {
	var current *autoscalingv2.MetricValueStatus
	for _, m := range h.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU {
			current = &m.Resource.Current
		}
	}
	if current == nil || current.AverageValue == nil || current.AverageUtilization == nil {
		return fmt.Errorf("HPA status.currentMetrics has no CPU average: %+v", h.Status.CurrentMetrics)
	}
	avg := sum / uint64(replicas)
	if got := current.AverageValue.ScaledValue(resource.Nano); !framework.WithinPercent(got, int64(avg), 2) {
		return fmt.Errorf("HPA currentMetrics average CPU %dn, truth %dn per pod over %d pods", got, avg, replicas)
	}
	if util, want := int64(*current.AverageUtilization), int64(avg*100/hpaRequestNano); util < want-1 || util > want+1 {
		return fmt.Errorf("HPA currentMetrics utilization %d%%, truth %d%%", util, want)
	}
	out, err := env.cp.Kubectl(ctx, "", "top", "pods", "-n", hpaNamespace, "-l", "app=web", "--no-headers")
	if err != nil {
		return err
	}
	var milli, rows int64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || !strings.HasSuffix(f[1], "m") {
			return fmt.Errorf("kubectl top pods row %q", line)
		}
		v, err := strconv.ParseInt(strings.TrimSuffix(f[1], "m"), 10, 64)
		if err != nil {
			return fmt.Errorf("kubectl top pods row %q: %w", line, err)
		}
		milli, rows = milli+v, rows+1
	}
	hpaTotal := current.AverageValue.MilliValue() * int64(replicas)
	if rows != int64(replicas) || milli < hpaTotal*98/100 || milli > hpaTotal*102/100+rows {
		return fmt.Errorf("kubectl top pods: %d pods using %dm, the HPA saw %d pods averaging %s (%dm in all)",
			rows, milli, replicas, current.AverageValue.String(), hpaTotal)
	}
	return nil
}

// deleteWorkload removes what the test created. No namespace or garbage-collector controller runs here, so
// it deletes the HPA, the Deployment, its ReplicaSets and their pods itself (pods at once, as a kubelet
// confirming termination would), then drops the pods from the simulator.
func deleteWorkload(t *testing.T, a *adopter) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := env.cp.Client
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	sel := metav1.ListOptions{LabelSelector: "app=web"}
	errs := []error{
		c.AutoscalingV2().HorizontalPodAutoscalers(hpaNamespace).Delete(ctx, "web", now),
		c.AppsV1().Deployments(hpaNamespace).Delete(ctx, "web", now),
		c.AppsV1().ReplicaSets(hpaNamespace).DeleteCollection(ctx, now, sel),
		c.CoreV1().Pods(hpaNamespace).DeleteCollection(ctx, now, sel),
	}
	for _, err := range errs {
		if err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	}
	for name := range a.adopted {
		env.sim.RemovePod(hpaNamespace, name)
	}
}
