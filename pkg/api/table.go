package api

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/metrics/pkg/apis/metrics"
)

// columns are the same for both kinds, so `kubectl get nodemetrics` and `kubectl get podmetrics` read alike.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the resource"},
	{Name: "CPU", Type: "string", Format: "quantity", Description: "CPU usage in millicores, averaged over the window"},
	{Name: "Memory", Type: "string", Format: "quantity", Description: "Memory working set in mebibytes"},
	{Name: "Window", Type: "string", Format: "duration", Description: "Interval the CPU usage was averaged over"},
}

// ConvertToTable implements rest.TableConvertor.
func (s *NodeStorage) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: columns}
	if shared, ok := obj.(*sharedNodeList); ok {
		obj = shared.NodeMetricsList
	}
	switch t := obj.(type) {
	case *metrics.NodeMetrics:
		table.ResourceVersion = t.ResourceVersion
		table.Rows = []metav1.TableRow{nodeRow(t)}
	case *metrics.NodeMetricsList:
		table.ResourceVersion = t.ResourceVersion
		table.Continue = t.Continue
		table.Rows = make([]metav1.TableRow, len(t.Items))
		for i := range t.Items {
			table.Rows[i] = nodeRow(&t.Items[i])
		}
	default:
		return nil, fmt.Errorf("cannot convert %T to a NodeMetrics table", obj)
	}
	return table, nil
}

// ConvertToTable implements rest.TableConvertor; a pod's usage is the sum over its containers.
func (s *PodStorage) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: columns}
	if shared, ok := obj.(*sharedPodList); ok {
		obj = shared.PodMetricsList
	}
	switch t := obj.(type) {
	case *metrics.PodMetrics:
		table.ResourceVersion = t.ResourceVersion
		table.Rows = []metav1.TableRow{podRow(t)}
	case *metrics.PodMetricsList:
		table.ResourceVersion = t.ResourceVersion
		table.Continue = t.Continue
		table.Rows = make([]metav1.TableRow, len(t.Items))
		for i := range t.Items {
			table.Rows[i] = podRow(&t.Items[i])
		}
	default:
		return nil, fmt.Errorf("cannot convert %T to a PodMetrics table", obj)
	}
	return table, nil
}

func nodeRow(m *metrics.NodeMetrics) metav1.TableRow {
	return metav1.TableRow{
		Cells: []any{m.Name, cpuCell(m.Usage[corev1.ResourceCPU]), memoryCell(m.Usage[corev1.ResourceMemory]),
			m.Window.Duration.String()},
		Object: runtime.RawExtension{Object: m},
	}
}

func podRow(m *metrics.PodMetrics) metav1.TableRow {
	var cpu, mem resource.Quantity
	for _, c := range m.Containers {
		cpu.Add(c.Usage[corev1.ResourceCPU])
		mem.Add(c.Usage[corev1.ResourceMemory])
	}
	return metav1.TableRow{
		Cells:  []any{m.Name, cpuCell(cpu), memoryCell(mem), m.Window.Duration.String()},
		Object: runtime.RawExtension{Object: m},
	}
}
