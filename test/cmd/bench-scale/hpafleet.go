package main

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
	"golang.org/x/sync/errgroup"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The HPA fleet (issue 29 item 2): one autoscaling/v2 HPA on CPU utilization per simulated workload, synced
// by the real kube-controller-manager (its HPA controller alone: no Deployment or ReplicaSet controller, so
// the simulator's pods stay the only ones). minReplicas = maxReplicas = the workload's pods: every sync computes
// the metric, none scales.

// hpaTargetUtilization is every HPA's CPU target, in percent of the pods' requests.
const hpaTargetUtilization = 80

// startHPAFleet creates an HPA per workload and starts kube-controller-manager with its HPA controller tuned as
// a large cluster would: more concurrent syncs, and client QPS to match (the default 20 would throttle
// 2,000 HPAs' scale reads and status writes).
func startHPAFleet(ctx context.Context, cp *framework.ControlPlane, c kubernetes.Interface, o options,
	ws []kubeletsim.Workload) error {
	fmt.Fprintf(cp.Out, "creating %d HPAs...\n", len(ws))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, w := range ws {
		g.Go(func() error {
			pods := int32(w.Pods)
			target := int32(hpaTargetUtilization)
			hpa := &autoscalingv2.HorizontalPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: w.Name},
					MinReplicas:    &pods, MaxReplicas: pods,
					Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
						Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
							Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}},
				},
			}
			_, err := c.AutoscalingV2().HorizontalPodAutoscalers(w.Namespace).Create(gctx, hpa, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating HPA %s/%s: %w", w.Namespace, w.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	qps := max(100, 3*len(ws)/int(max(1, o.hpaSyncPeriod/time.Second))) // a scale read and a status write per sync, and headroom
	return cp.StartControllerManagerWith(ctx, []string{
		"--controllers=horizontalpodautoscaling",
		"--horizontal-pod-autoscaler-sync-period=" + o.hpaSyncPeriod.String(),
		"--concurrent-horizontal-pod-autoscaler-syncs=" + strconv.Itoa(o.hpaSyncsOrAuto()),
		"--kube-api-qps=" + strconv.Itoa(qps), "--kube-api-burst=" + strconv.Itoa(2*qps),
		"-v=1",
	})
}

// hpaCheck compares each HPA's status.currentMetrics with the utilization the truth gives its pods.
type hpaCheck struct {
	checks, agree, off, none int
	maxOff                   float64 // percentage points
}

func (h *hpaCheck) add(o hpaCheck) {
	h.checks, h.agree, h.off, h.none = h.checks+o.checks, h.agree+o.agree, h.off+o.off, h.none+o.none
	h.maxOff = max(h.maxOff, o.maxOff)
}

// checkHPAs reads every HPA's status once and compares it with the truth. An HPA averages over the pods it
// had metrics for at its last sync (new pods are left out for a while), so it agrees within 3 points or 10 %.
func checkHPAs(ctx context.Context, c kubernetes.Interface, sim *kubeletsim.Sim, containers int) (hpaCheck, error) {
	var r hpaCheck
	list, err := c.AutoscalingV2().HorizontalPodAutoscalers("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return r, fmt.Errorf("listing HPAs: %w", err)
	}
	truth, byWorkload := sim.Truth(), sim.WorkloadPodKeys()
	for _, h := range list.Items {
		r.checks++
		var got *int32
		for _, m := range h.Status.CurrentMetrics {
			if m.Resource != nil && m.Resource.Name == corev1.ResourceCPU {
				got = m.Resource.Current.AverageUtilization
			}
		}
		var sum uint64
		pods := 0
		for _, k := range byWorkload[h.Namespace+"/"+h.Name] {
			if cs, ok := truth.Pods[k]; ok {
				pods++
				for _, u := range cs {
					sum += u.CPUNanoCores
				}
			}
		}
		if got == nil || pods == 0 {
			r.none++
			continue
		}
		want := float64(sum) / float64(pods*containers*100_000_000) * 100 // requests: 100m a container
		d := math.Abs(float64(*got) - want)
		r.maxOff = max(r.maxOff, d)
		if d <= max(3, want/10) {
			r.agree++
		} else {
			r.off++
		}
	}
	return r, nil
}

// failedMetricEvents counts the FailedGetResourceMetric events so far, by event (each counts its repeats), with
// each event's message: what the controller said is what tells a slow answer from a missing pod.
func failedMetricEvents(ctx context.Context, c kubernetes.Interface) (map[types.UID]eventCount, error) {
	list, err := c.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedGetResourceMetric"})
	if err != nil {
		return nil, fmt.Errorf("listing FailedGetResourceMetric events: %w", err)
	}
	out := map[types.UID]eventCount{}
	for _, e := range list.Items {
		n := max(1, e.Count)
		if e.Series != nil {
			n = max(n, e.Series.Count)
		}
		out[e.UID] = eventCount{n: n, message: e.Message}
	}
	return out, nil
}

// eventCount is one event's repeats and message.
type eventCount struct {
	n       int32
	message string
}

// eventsBetween is how many events happened between two counts, and how many of them said each message (with the
// object's names left out, so that one cause is one line).
func eventsBetween(before, after map[types.UID]eventCount) (int, map[string]int) {
	n, byMessage := 0, map[string]int{}
	for uid, c := range after {
		if d := int(c.n - before[uid].n); d > 0 {
			n += d
			byMessage[eventCause(c.message)] += d
		}
	}
	return n, byMessage
}

// eventCause is an event's message without the names of pods, namespaces and HPAs in it, at most 200 bytes.
func eventCause(msg string) string {
	msg = namesInMessage.ReplaceAllString(msg, "<name>")
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

var namesInMessage = regexp.MustCompile(`sim-[a-z0-9-]+`)
