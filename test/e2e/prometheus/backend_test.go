package prometheus

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// usePrometheus points the APIServices at the Prometheus backend for one test and back at the kubelet backend
// afterwards, the way an operator would: with kubectl patch.
func usePrometheus(t *testing.T) {
	t.Helper()
	pointAPIService(t, prometheusService)
	t.Cleanup(func() { pointAPIService(t, kubeletService) })
}

// pointAPIService runs the README's one-command swap with the real kubectl (`for v in v1 v1beta1; do kubectl
// patch apiservice $v.metrics.k8s.io ...; done`), waits for both to be Available and then until answers through
// the aggregator in both versions come from that backend (told apart by their window).
func pointAPIService(t *testing.T, service string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"service":{"name":%q}}}`, service)
	for _, name := range framework.APIServiceNames {
		if _, err := env.cp.Kubectl(context.Background(), "", "patch", "apiservice", name, "--type=merge", "-p", patch); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range framework.APIServiceNames {
		out, err := env.cp.Kubectl(context.Background(), "", "get", "apiservice", name, "-o", "jsonpath={.spec.service.name}")
		if err != nil {
			t.Fatal(err)
		}
		if out != service {
			t.Fatalf("after kubectl patch the APIService %s points at %q, want %q", name, out, service)
		}
	}
	if err := env.api.WaitAvailable(context.Background(), nil, settle); err != nil {
		t.Fatal(err)
	}
	for _, v := range framework.MetricsVersions {
		framework.Eventually(t, "answers through the aggregator's metrics.k8s.io/"+v+" from "+service, settle, func(ctx context.Context) error {
			s, err := viaAggregatorAt(ctx, v)
			if err != nil {
				return err
			}
			if by := servedBy(s); by != service {
				return fmt.Errorf("windows %s: answered by %q", describeWindows(s), by)
			}
			return nil
		})
	}
}

// topMatchesTruth runs kubectl top nodes and kubectl top pods -A and checks that every node and pod is listed,
// no other, each with the truth as kubectl prints it.
func topMatchesTruth(ctx context.Context) error {
	truth := env.sim.Truth()
	out, err := env.cp.Kubectl(ctx, "", "top", "nodes")
	if err != nil {
		return err
	}
	rows, err := framework.TableWithHeader(out, 1, "NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)")
	if err != nil {
		return err
	}
	var errs []error
	if len(rows) != len(truth.Nodes) {
		errs = append(errs, fmt.Errorf("kubectl top nodes listed %d nodes, the truth has %d:\n%s", len(rows), len(truth.Nodes), out))
	}
	for name, u := range truth.Nodes {
		r, ok := rows[name]
		if !ok {
			errs = append(errs, fmt.Errorf("kubectl top nodes: %s missing", name))
			continue
		}
		errs = append(errs, checkTopCell("node "+name, r[0], r[2], u.CPUNanoCores, u.MemoryBytes))
	}
	out, err = env.cp.Kubectl(ctx, "", "top", "pods", "-A")
	if err != nil {
		return err
	}
	if rows, err = framework.TableWithHeader(out, 2, "NAMESPACE", "NAME", "CPU(cores)", "MEMORY(bytes)"); err != nil {
		return err
	}
	if len(rows) != len(truth.Pods) {
		errs = append(errs, fmt.Errorf("kubectl top pods -A listed %d pods, the truth has %d:\n%s", len(rows), len(truth.Pods), out))
	}
	for key, cs := range truth.Pods {
		r, ok := rows[key]
		if !ok {
			errs = append(errs, fmt.Errorf("kubectl top pods -A: %s missing", key))
			continue
		}
		var cpu, mem uint64
		for _, u := range cs {
			cpu, mem = cpu+u.CPUNanoCores, mem+u.MemoryBytes
		}
		errs = append(errs, checkTopCell("pod "+key, r[0], r[1], cpu, mem))
	}
	return errors.Join(errs...)
}

// servesTruthFrom checks one read through the aggregator: answered by service, with the truth.
func servesTruthFrom(service string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		s, err := viaAggregator(ctx)
		if err != nil {
			return err
		}
		if by := servedBy(s); by != service {
			return fmt.Errorf("answered by %q (windows %s), want %s", by, describeWindows(s), service)
		}
		return matchTruth(s, env.sim.Truth())
	}
}

// TestPrometheusBackendMatchesTruthAndKubeletSource serves the API from Prometheus: kubectl top lists every
// node and pod with the truth, and client-go reads every value within 2 % of the truth and of the kubelet
// source's own answer on the same cluster, memory exact.
func TestPrometheusBackendMatchesTruthAndKubeletSource(t *testing.T) {
	usePrometheus(t)
	framework.Eventually(t, "the Prometheus source to serve the truth through the aggregator", warmup, servesTruthFrom(prometheusService))
	framework.Eventually(t, "kubectl top nodes and pods -A to print the truth", settle, topMatchesTruth)
	framework.Eventually(t, "the Prometheus source to agree with the kubelet source", settle, func(ctx context.Context) error {
		prom, err := viaAggregator(ctx)
		if err != nil {
			return err
		}
		kubelet, err := direct(ctx, env.kubelet)
		if err != nil {
			return err
		}
		if by := servedBy(kubelet); by != kubeletService {
			return fmt.Errorf("the kubelet backend's windows are %s", describeWindows(kubelet))
		}
		// The kubelet source must itself be right, or agreeing with it would prove nothing.
		if err := matchTruth(kubelet, env.sim.Truth()); err != nil {
			return fmt.Errorf("kubelet source: %w", err)
		}
		return match(prom, kubelet)
	})
}
