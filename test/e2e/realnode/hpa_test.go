package realnode

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	hpaTotal   = 240 // millicores the pods share: 4.8 pods' target, off the HPA's 10 % edges (280 was 1.12 at 5)
	hpaRequest = 100 // millicores each pod requests
	hpaTarget  = 50  // percent of the request
	hpaMax     = 8
)

// TestHPAScalesRealPods: the real HPA, on metrics-ring's numbers, scales a Deployment of real pods sharing a
// load of 280m (as behind a Service) to the replica count their cgroups imply at a 50 % target of 100m, and
// back to one when the load stops.
func TestHPAScalesRealPods(t *testing.T) {
	needNode(t)
	ctx := context.Background()
	if err := env.cp.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	share, err := os.MkdirTemp(env.cp.Dir, "hpa-share-")
	if err != nil {
		t.Fatal(err)
	}
	setTotal := func(m int) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(share, "total"), []byte(strconv.Itoa(m)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setTotal(hpaTotal)
	createHPADeployment(t, share)

	replicas := 0
	framework.EventuallyEvery(t, "HPA settled above one replica", 5*time.Second, 6*time.Minute, func(ctx context.Context) error {
		hpa, err := env.cp.Client.AutoscalingV2().HorizontalPodAutoscalers(namespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s := hpa.Status
		if s.CurrentReplicas <= 1 || s.DesiredReplicas != s.CurrentReplicas || readyPods(ctx) != int(s.CurrentReplicas) {
			return fmt.Errorf("replicas %d, desired %d, ready pods %d", s.CurrentReplicas, s.DesiredReplicas, readyPods(ctx))
		}
		replicas = int(s.CurrentReplicas)
		return nil
	})
	// What the cgroups imply: their CPU over 20 s, against the target per pod. The load a pod gets moves with the
	// machine's, so the HPA is given a few of its syncs to follow it (it scaled on an earlier window than ours).
	perPod := float64(hpaRequest*hpaTarget/100) / 1000
	framework.EventuallyEvery(t, "HPA at the replica count the cgroups imply", time.Second, 3*time.Minute, func(ctx context.Context) error {
		hpa, err := env.cp.Client.AutoscalingV2().HorizontalPodAutoscalers(namespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		replicas = int(hpa.Status.CurrentReplicas)
		used, err := podsCPU(ctx, 20*time.Second)
		if err != nil {
			return err
		}
		ratio := used / (float64(replicas) * perPod)
		implied := int(math.Ceil(used / perPod))
		t.Logf("HPA at %d replicas; the pods' cgroups used %.3f cores, %.2f of the target (the cgroups imply %d)",
			replicas, used, ratio, implied)
		// The HPA leaves replicas alone within 10 % of the target; allow 5 % more for the windows' differences.
		if replicas != implied && math.Abs(ratio-1) > 0.15 {
			return fmt.Errorf("HPA holds %d replicas, the cgroups' %.3f cores imply %d (%.2f of the target)", replicas, used, implied, ratio)
		}
		return nil
	})

	setTotal(0)
	framework.EventuallyEvery(t, "HPA scaled back to 1", 5*time.Second, 5*time.Minute, func(ctx context.Context) error {
		hpa, err := env.cp.Client.AutoscalingV2().HorizontalPodAutoscalers(namespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if hpa.Status.DesiredReplicas != 1 {
			return fmt.Errorf("desired replicas %d", hpa.Status.DesiredReplicas)
		}
		return nil
	})
}

func createHPADeployment(t *testing.T, share string) {
	t.Helper()
	ctx := context.Background()
	c := env.cp.Client
	labels := map[string]string{"app": "web"}
	ctr := workload("web", "-share=/share")
	ctr.Resources.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(hpaRequest, resource.DecimalSI)
	ctr.VolumeMounts = []corev1.VolumeMount{{Name: "share", MountPath: "/share"}}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeName: nodeName, Containers: []corev1.Container{ctr},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Volumes: []corev1.Volume{{Name: "share", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: share, Type: ptr.To(corev1.HostPathDirectory)},
					}}},
				},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	zero := ptr.To[int32](0)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: hpaMax,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name:   corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](hpaTarget)},
			}}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: zero},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: zero},
			},
		},
	}
	if _, err := c.AutoscalingV2().HorizontalPodAutoscalers(namespace).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No garbage collector runs here: remove the ReplicaSets and pods explicitly.
	t.Cleanup(func() {
		ctx := context.Background()
		_ = c.AutoscalingV2().HorizontalPodAutoscalers(namespace).Delete(ctx, "web", metav1.DeleteOptions{})
		_ = c.AppsV1().Deployments(namespace).Delete(ctx, "web", metav1.DeleteOptions{})
		_ = c.AppsV1().ReplicaSets(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=web"})
		pods, _ := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		for _, p := range pods.Items {
			deletePod(t, p.Name)
		}
	})
}

// readyPods counts the Deployment's running, undeleted pods.
func readyPods(ctx context.Context) int {
	pods, err := env.cp.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

// podsCPU is the CPU the Deployment's pods used over d, in cores, from their pod cgroups' cpuacct.usage.
func podsCPU(ctx context.Context, d time.Duration) (float64, error) {
	pods, err := env.cp.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return 0, err
	}
	mount, err := framework.CPUAcctMount()
	if err != nil {
		return 0, err
	}
	var files []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		dir, err := framework.FindDir(filepath.Join(mount, env.node.CgroupRoot), "pod"+string(p.UID))
		if err != nil {
			return 0, err
		}
		files = append(files, filepath.Join(dir, "cpuacct.usage"))
	}
	read := func() (float64, error) {
		sum := 0.0
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return 0, err
			}
			v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", f, err)
			}
			sum += float64(v)
		}
		return sum, nil
	}
	start := time.Now()
	a, err := read()
	if err != nil {
		return 0, err
	}
	time.Sleep(d)
	b, err := read()
	if err != nil {
		return 0, err
	}
	return (b - a) / float64(time.Since(start)), nil
}
