package api

import (
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

func TestTable(t *testing.T) {
	m, nodes, pods := fixture()
	ns, ps := nodeRESTOf(m, nodes, nil), podRESTOf(m, pods)
	ctx := genericapirequest.WithNamespace(context.Background(), "ns-a")

	nodeList, err := ns.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	podList, err := ps.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	onePod, err := ps.Get(ctx, "p2", nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		convert func() (*metav1.Table, error)
		want    [][]any
	}{
		{"node list", func() (*metav1.Table, error) { return ns.ConvertToTable(ctx, nodeList, nil) }, [][]any{
			// 1234567n rounds up to 2m as kubectl top shows it; 512Mi.
			{"node-a", "2m", "512Mi", "15s"},
			{"node-b", "250m", "3072Mi", "15s"},
		}},
		{"pod list, summed over containers", func() (*metav1.Table, error) { return ps.ConvertToTable(ctx, podList, nil) }, [][]any{
			{"p1", "1m", "0Mi", "15s"},
			{"p2", "151m", "25Mi", "15s"},
		}},
		{"one pod", func() (*metav1.Table, error) { return ps.ConvertToTable(ctx, onePod, nil) }, [][]any{
			{"p2", "151m", "25Mi", "15s"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table, err := tc.convert()
			if err != nil {
				t.Fatal(err)
			}
			var cols []string
			for _, c := range table.ColumnDefinitions {
				cols = append(cols, c.Name)
			}
			if !reflect.DeepEqual(cols, []string{"Name", "CPU", "Memory", "Window"}) {
				t.Fatalf("columns %v", cols)
			}
			var got [][]any
			for _, r := range table.Rows {
				got = append(got, r.Cells)
				if r.Object.Object == nil {
					t.Errorf("row %v carries no object", r.Cells)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("rows\n got %v\nwant %v", got, tc.want)
			}
		})
	}
	if _, err := ns.ConvertToTable(ctx, podList, nil); err == nil {
		t.Error("converting pods with the node storage: want an error")
	}
}

func TestQuantities(t *testing.T) {
	tests := []struct {
		cpu, mem         uint64
		wantCPU, wantMem string
	}{
		{cpu: 250_000_000, mem: 3 << 30, wantCPU: "250m", wantMem: "3Gi"},
		{cpu: 123_456_789, mem: 1000, wantCPU: "123456789n", wantMem: "1k"}, // BinarySI falls back to decimal, as in metrics-server
		{cpu: 0, mem: 45 << 20, wantCPU: "0", wantMem: "45Mi"},
		{cpu: 1 << 63, mem: 1, wantCPU: "9223372036854775800n", wantMem: "1"},
	}
	for _, tc := range tests {
		rl := resourceList(storageUsage(tc.cpu, tc.mem))
		cpu, mem := rl["cpu"], rl["memory"]
		if cpu.String() != tc.wantCPU || mem.String() != tc.wantMem {
			t.Errorf("usage %d/%d: got %s/%s, want %s/%s", tc.cpu, tc.mem, cpu.String(), mem.String(), tc.wantCPU, tc.wantMem)
		}
	}
}
