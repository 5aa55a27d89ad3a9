package framework

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// These mirror k8s.io/kubectl/pkg/metricsutil's printing, so that the e2e tests state their expectations as
// kubectl would print the truth: CPU rounded up to whole millicores, memory truncated to whole MiB,
// percentages of allocatable truncated to integers. One copy, so the packages cannot drift from kubectl apart.

// CPUQuantity is a CPU usage in nanocores as the metrics API serves it.
func CPUQuantity(nanoCores uint64) resource.Quantity {
	return *resource.NewScaledQuantity(int64(nanoCores), resource.Nano)
}

// MemQuantity is a memory usage in bytes as the metrics API serves it.
func MemQuantity(bytes uint64) resource.Quantity {
	return *resource.NewQuantity(int64(bytes), resource.BinarySI)
}

// KubectlCPU is q as kubectl top prints a CPU column.
func KubectlCPU(q resource.Quantity) string { return fmt.Sprintf("%vm", q.MilliValue()) }

// KubectlMem is q as kubectl top prints a memory column.
func KubectlMem(q resource.Quantity) string { return fmt.Sprintf("%vMi", q.Value()/(1024*1024)) }

// KubectlPercent is used as a share of available, as kubectl top nodes prints it.
func KubectlPercent(used, available resource.Quantity) string {
	fraction := 0.0
	if !available.IsZero() {
		fraction = float64(used.MilliValue()) / float64(available.MilliValue()) * 100
	}
	return fmt.Sprintf("%d%%", int64(fraction))
}

// Table parses kubectl's column output into rows of fields keyed by the first keyCols fields joined by "/"
// (the key's fields are not repeated in the row). The header row is returned separately. A row of another
// width than the header, or a key listed twice, is an error: kubectl top never prints either.
func Table(out string, keyCols int) (header []string, rows map[string][]string, err error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return nil, nil, fmt.Errorf("no output")
	}
	header = strings.Fields(lines[0])
	rows = map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(header) {
			return nil, nil, fmt.Errorf("row %q has %d fields, header %q has %d", l, len(f), lines[0], len(header))
		}
		key := strings.Join(f[:keyCols], "/")
		if _, dup := rows[key]; dup {
			return nil, nil, fmt.Errorf("row %q listed twice", key)
		}
		rows[key] = f[keyCols:]
	}
	return header, rows, nil
}

// TableWithHeader is Table for output whose header must be exactly header.
func TableWithHeader(out string, keyCols int, header ...string) (map[string][]string, error) {
	got, rows, err := Table(out, keyCols)
	if err == nil && strings.Join(got, " ") != strings.Join(header, " ") {
		err = fmt.Errorf("header %q, want %q", got, header)
	}
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// DiffRows describes how got differs from want (rows as Table returns them), sorted so that a failure reads
// the same every run, or returns "" when they are equal.
func DiffRows(want, got map[string][]string) string {
	var d []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("missing %s (want %v)", k, w))
		case strings.Join(g, " ") != strings.Join(w, " "):
			d = append(d, fmt.Sprintf("%s: got %v, want %v", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("unexpected %s %v", k, g))
		}
	}
	sort.Strings(d)
	return strings.Join(d, "; ")
}
