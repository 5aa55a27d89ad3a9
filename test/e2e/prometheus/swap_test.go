package prometheus

import (
	"context"
	"fmt"
	"testing"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// TestSwapBackendsWithKubectlPatch swaps both APIServices (v1 and v1beta1) from the kubelet source to the
// Prometheus source and back with the README's one command, the real kubectl patch. After each swap kubectl top
// answers correctly, and the windows read through each version (client-go) show which backend answered: about one resolution from the kubelet
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
		framework.Eventually(t, "kubectl top after pointing the APIService at "+step.service, timeout, func(ctx context.Context) error {
			if err := topMatchesTruth(ctx); err != nil {
				return err
			}
			// kubectl (reading v1) does not print the window; read it in both versions, v1beta1 the way the HPA does,
			// after kubectl's answer: both APIServices moved.
			for _, v := range framework.MetricsVersions {
				s, err := viaAggregatorAt(ctx, v)
				if err != nil {
					return err
				}
				if by := servedBy(s); by != step.service {
					return fmt.Errorf("%s windows %s: answered by %q, want %s", v, describeWindows(s), by, step.service)
				}
			}
			return nil
		})
	}
}
