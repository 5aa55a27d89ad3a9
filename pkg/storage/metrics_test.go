package storage

import (
	"math"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
)

// Storage is the one counter of rejected samples, for every source: each rejection is counted once, by reason.
func TestRejectionsCounted(t *testing.T) {
	value := func(reason string) float64 {
		v, err := testutil.GetCounterMetricValue(samplesRejected.WithLabelValues(reason))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	f := newFixture(Options{})
	f.bind("nan", "inf", "zero", "ok")
	invalid, zero := value("invalid"), value("zero")
	rej := f.scrape(0, nil, []ContainerSample{
		ctr("nan", "app", 0, -time.Hour, math.NaN(), 1e6),
		ctr("inf", "app", 0, -time.Hour, 1, math.Inf(1)),
		ctr("zero", "app", 0, -time.Hour, 0, 1e6),
		ctr("ok", "app", 0, -time.Hour, 1, 1e6),
	})
	if rej.Invalid != 2 || rej.Zero != 1 {
		t.Fatalf("rejection %+v, want 2 invalid and 1 zero", rej)
	}
	if got := value("invalid") - invalid; got != 2 {
		t.Errorf("samples_rejected_total{reason=invalid} grew by %v, want 2", got)
	}
	if got := value("zero") - zero; got != 1 {
		t.Errorf("samples_rejected_total{reason=zero} grew by %v, want 1", got)
	}
}
