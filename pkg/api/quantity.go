package api

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// resourceSwap is the key `kubectl top --show-swap` reads; core/v1 has no constant for it.
const resourceSwap corev1.ResourceName = "swap"

// resourceList converts a usage to the API form exactly as metrics-server does: CPU as a DecimalSI quantity of
// nanocores (serialized "123456789n", or "123m" when it is whole millicores), memory in bytes as BinarySI ("45Mi").
// Swap, in bytes as BinarySI like memory, is there only when the source reported it: a missing key is unknown,
// where 0 would claim that nothing is swapped (DESIGN.md section 2).
func resourceList(u storage.Usage) corev1.ResourceList {
	l := corev1.ResourceList{
		corev1.ResourceCPU:    uint64Quantity(u.CPU, resource.DecimalSI, -9),
		corev1.ResourceMemory: uint64Quantity(u.Memory, resource.BinarySI, 0),
	}
	if swap, ok := u.Swap(); ok {
		l[resourceSwap] = uint64Quantity(swap, resource.BinarySI, 0)
	}
	return l
}

// uint64Quantity builds a Quantity from a uint64; Quantity constructors take int64, so values beyond it lose one
// decimal digit of precision rather than wrapping negative.
func uint64Quantity(v uint64, format resource.Format, scale resource.Scale) resource.Quantity {
	var q resource.Quantity
	if v > math.MaxInt64 {
		q = *resource.NewScaledQuantity(int64(v/10), scale+1)
	} else {
		q = *resource.NewScaledQuantity(int64(v), scale)
	}
	q.Format = format
	return q
}

// cpuCell and memoryCell print quantities as `kubectl top` does: millicores rounded up, whole mebibytes.
func cpuCell(q resource.Quantity) string    { return fmt.Sprintf("%dm", q.MilliValue()) }
func memoryCell(q resource.Quantity) string { return fmt.Sprintf("%dMi", q.Value()/(1024*1024)) }
