package e2e

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// These mirror k8s.io/kubectl/pkg/metricsutil's printing, so expectations are the truth as kubectl would
// print it: CPU rounded up to whole millicores, memory truncated to whole MiB, percentages of allocatable
// truncated to integers.

func cpuQuantity(nanoCores uint64) resource.Quantity {
	return *resource.NewScaledQuantity(int64(nanoCores), resource.Nano)
}

func memQuantity(bytes uint64) resource.Quantity {
	return *resource.NewQuantity(int64(bytes), resource.BinarySI)
}

func kubectlCPU(q resource.Quantity) string { return fmt.Sprintf("%vm", q.MilliValue()) }

func kubectlMem(q resource.Quantity) string { return fmt.Sprintf("%vMi", q.Value()/(1024*1024)) }

func kubectlPercent(used, available resource.Quantity) string {
	fraction := 0.0
	if !available.IsZero() {
		fraction = float64(used.MilliValue()) / float64(available.MilliValue()) * 100
	}
	return fmt.Sprintf("%d%%", int64(fraction))
}

// table parses kubectl's column output into rows of fields keyed by the first keyCols fields joined by "/".
// The header row is returned separately.
func table(out string, keyCols int) (header []string, rows map[string][]string, err error) {
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

// diffRows describes how got differs from want, or returns "" when they are equal.
func diffRows(want, got map[string][]string) string {
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

// withinPercent reports whether got is within pct percent of want.
func withinPercent(got, want int64, pct float64) bool {
	return math.Abs(float64(got-want)) <= math.Abs(float64(want))*pct/100
}
