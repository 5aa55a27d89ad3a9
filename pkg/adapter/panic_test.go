package adapter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// panickyAdd is a bug in storing a poll's samples: it panics on the container batch.
func panickyAdd(b *storage.Batch) storage.Rejection {
	if len(b.Containers) > 0 {
		var seen map[string]int
		//lint:ignore SA5000 a real runtime panic (its message and stack) is what the test checks
		seen["containers"]++ // assignment to entry in nil map
	}
	return storage.Rejection{}
}

// A panic while mapping the results and storing them loses that poll, as an error counted and logged with its
// stack once per streak, never the process; the next poll serves again.
func TestMappingPanicLosesOnlyThatPoll(t *testing.T) {
	var logs logBuffer
	klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logs))))
	t.Cleanup(klog.ClearLogger)
	h := newHarness(t, Options{})
	before, _ := testutil.GetCounterMetricValue(mappingPanics)
	for range 2 {
		o := h.adapter.Collect(context.Background(), panickyAdd)
		if o.Success || !errors.Is(o.Err, logonly.ErrPanic) || !strings.Contains(o.Err.Error(), "mapping the results: panic") ||
			strings.Contains(o.Err.Error(), "nil map") {
			t.Fatalf("poll %v %v: want a failure naming the mapping's panic, without its value", o.Success, o.Err)
		}
	}
	if after, _ := testutil.GetCounterMetricValue(mappingPanics); after != before+2 {
		t.Errorf("%s went %v -> %v, want +2", "metrics_ring_prometheus_mapping_panics_total", before, after)
	}
	if n := strings.Count(logs.String(), "assignment to entry in nil map"); n != 1 || !strings.Contains(logs.String(), "panickyAdd") {
		t.Errorf("want the panic logged once, with a stack through panickyAdd; %d times in:\n%s", n, logs.String())
	}
	h.poll(15 * time.Second)
	if _, ok := h.store.Latest().Pod("ns", "p"); !ok {
		t.Error("the next poll was not served")
	}
	if !strings.Contains(logs.String(), "Prometheus results are mapped again") {
		t.Errorf("the end of the streak was not logged:\n%s", logs.String())
	}
}
