package api

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// columns are the same for both kinds, so `kubectl get nodemetrics` and `kubectl get podmetrics` read alike.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the resource"},
	{Name: "CPU", Type: "string", Format: "quantity", Description: "CPU usage in millicores, averaged over the window"},
	{Name: "Memory", Type: "string", Format: "quantity", Description: "Memory working set in mebibytes"},
	{Name: "Window", Type: "string", Format: "duration", Description: "Interval the CPU usage was averaged over"},
}

// ConvertToTable implements rest.TableConvertor.
// A table is made for its request alone: a table of a list takes its room in the answer budget.
func (s *metricsREST[P]) ConvertToTable(ctx context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	if item, ok := obj.(*watchItem[P]); ok { // a watch event's object, for `kubectl get -w`
		obj = item.GetObject()
	}
	if l, ok := obj.(leanObject); ok { // a kept full list: its items, made for this request
		var err error
		if obj, err = l.listObjects(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.tableRoom(ctx, obj); err != nil {
		return nil, err
	}
	rows, lm, ok := s.kind.rows(obj)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T to a %s table", obj, s.info.kind)
	}
	return &metav1.Table{ColumnDefinitions: columns, ListMeta: metav1.ListMeta{ResourceVersion: lm.ResourceVersion, Continue: lm.Continue}, Rows: rows}, nil
}
