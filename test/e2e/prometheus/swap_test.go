package prometheus

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSwapBackendsWithKubectlPatch swaps the APIService from the kubelet source to the Prometheus source and
// back with the README's one command, the real kubectl patch. After each swap kubectl top answers correctly,
// and the window of PodMetrics (client-go) shows which backend answered: about one resolution from the kubelet
// source, the query's 1m range from Prometheus.
func TestSwapBackendsWithKubectlPatch(t *testing.T) {
	for _, step := range []struct {
		service string
		warm    bool // whether this backend may still be filling Prometheus' 1m range
	}{{kubeletService, false}, {prometheusService, true}, {kubeletService, false}} {
		pointAPIService(t, step.service)
		timeout := settle
		if step.warm {
			timeout = warmup
		}
		eventually(t, "kubectl top after pointing the APIService at "+step.service, timeout, func(ctx context.Context) error {
			if err := topMatchesTruth(ctx); err != nil {
				return err
			}
			// kubectl does not print the window; read it the way the HPA does, after kubectl's answer.
			pods, err := env.metrics.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			s := newSnapshot(nil, pods.Items)
			if by := servedBy(s); by != step.service {
				return fmt.Errorf("PodMetrics windows %s: answered by %q, want %s", describeWindows(s), by, step.service)
			}
			return nil
		})
	}
}
