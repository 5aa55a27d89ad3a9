package framework

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// MetricsVersions are the versions of metrics.k8s.io metrics-ring serves, preferred first (as APIServiceNames).
var MetricsVersions = []string{"v1", "v1beta1"}

// ListMetrics lists every NodeMetrics and PodMetrics through one version of metrics.k8s.io with that version's
// typed client, as its clients read it (kubectl 1.37 v1, the HPA v1beta1). The answer is in v1beta1's types
// (v1's are the same fields), so one check reads either version.
func ListMetrics(ctx context.Context, c metricsclient.Interface, version string) ([]metricsv1beta1.NodeMetrics, []metricsv1beta1.PodMetrics, error) {
	switch version {
	case "v1beta1":
		nodes, err := c.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("listing v1beta1 NodeMetrics: %w", err)
		}
		pods, err := c.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("listing v1beta1 PodMetrics: %w", err)
		}
		return nodes.Items, pods.Items, nil
	case "v1":
		nodes, err := c.MetricsV1().NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("listing v1 NodeMetrics: %w", err)
		}
		pods, err := c.MetricsV1().PodMetricses("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("listing v1 PodMetrics: %w", err)
		}
		ns := make([]metricsv1beta1.NodeMetrics, len(nodes.Items))
		for i, n := range nodes.Items {
			ns[i] = metricsv1beta1.NodeMetrics(n)
		}
		ps := make([]metricsv1beta1.PodMetrics, len(pods.Items))
		for i := range pods.Items {
			ps[i] = *FromV1Pod(&pods.Items[i])
		}
		return ns, ps, nil
	}
	return nil, nil, fmt.Errorf("metrics.k8s.io/%s is not served (%v)", version, MetricsVersions)
}

// GetPodMetrics reads one PodMetrics through one version of metrics.k8s.io (see ListMetrics).
func GetPodMetrics(ctx context.Context, c metricsclient.Interface, version, namespace, name string) (*metricsv1beta1.PodMetrics, error) {
	switch version {
	case "v1beta1":
		return c.MetricsV1beta1().PodMetricses(namespace).Get(ctx, name, metav1.GetOptions{})
	case "v1":
		p, err := c.MetricsV1().PodMetricses(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return FromV1Pod(p), nil
	}
	return nil, fmt.Errorf("metrics.k8s.io/%s is not served (%v)", version, MetricsVersions)
}

// FromV1Pod is p in v1beta1's types.
func FromV1Pod(p *metricsv1.PodMetrics) *metricsv1beta1.PodMetrics {
	cs := make([]metricsv1beta1.ContainerMetrics, len(p.Containers))
	for i, c := range p.Containers {
		cs[i] = metricsv1beta1.ContainerMetrics(c)
	}
	return &metricsv1beta1.PodMetrics{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta, Timestamp: p.Timestamp,
		Window: p.Window, Containers: cs}
}
