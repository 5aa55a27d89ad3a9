package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// TopNodesMatchTruth runs kubectl top nodes as the admin, with flags (--show-swap adds the swap columns), and
// compares every row with truth as kubectl prints it: every node listed, no other. CPU and memory percentages are of
// each node's allocatable in alloc (read from the API when nil, as kubectl reads it); swap's are of the Node's
// status.nodeInfo.swap.capacity, kubeletsim.NodeSwapBytes for every simulated node.
func (cp *ControlPlane) TopNodesMatchTruth(ctx context.Context, truth map[string]kubeletsim.Usage,
	alloc map[string]corev1.ResourceList, flags ...string) error {
	if alloc == nil {
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing nodes for their allocatable: %w", err)
		}
		alloc = map[string]corev1.ResourceList{}
		for _, n := range nodes.Items {
			alloc[n.Name] = n.Status.Allocatable
		}
	}
	out, err := cp.Kubectl(ctx, "", append([]string{"top", "nodes"}, flags...)...)
	if err != nil {
		return err
	}
	columns := []string{"NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"}
	showSwap := slices.Contains(flags, "--show-swap")
	if showSwap {
		columns = append(columns, "SWAP(bytes)", "SWAP(%)")
	}
	rows, err := TableWithHeader(out, 1, columns...)
	if err != nil {
		return err
	}
	want := map[string][]string{}
	for name, u := range truth {
		cpu, mem := CPUQuantity(u.CPUNanoCores), MemQuantity(u.MemoryBytes)
		want[name] = []string{
			KubectlCPU(cpu), KubectlPercent(cpu, alloc[name][corev1.ResourceCPU]),
			KubectlMem(mem), KubectlPercent(mem, alloc[name][corev1.ResourceMemory]),
		}
		if showSwap {
			swap := MemQuantity(u.SwapBytes)
			want[name] = append(want[name], KubectlMem(swap), KubectlPercent(swap, MemQuantity(kubeletsim.NodeSwapBytes)))
		}
	}
	if d := DiffRows(want, rows); d != "" {
		return errors.New(d)
	}
	return nil
}
