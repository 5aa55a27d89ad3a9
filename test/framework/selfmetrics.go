package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// SelfMetrics is one read of a backend's own /metrics, by metric family name.
type SelfMetrics map[string]*dto.MetricFamily

// selfMetricsLimit bounds a /metrics answer: the generic apiserver's own families make it far larger than
// what Get reads, but never this large.
const selfMetricsLimit = 32 << 20

// SelfMetrics reads the backend's /metrics directly, as the admin (the Prometheus that would scrape it in a
// cluster is granted the same non-resource URL), in the text format.
func (b *Backend) SelfMetrics(ctx context.Context) (SelfMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := b.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s /metrics: %w", b.Service, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%s /metrics: status %d: %s", b.Service, resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, selfMetricsLimit))
	if err != nil {
		return nil, fmt.Errorf("%s /metrics: %w", b.Service, err)
	}
	return SelfMetrics(fams), nil
}

// Sum adds the values of name's counter, gauge or untyped series whose labels include every given pair;
// it is 0 when there are none (a counter vector shows no series before its first increment).
func (s SelfMetrics) Sum(name string, labels map[string]string) float64 {
	var sum float64
	for _, m := range s.Series(name, labels) {
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

// Series returns name's series whose labels include every given pair.
func (s SelfMetrics) Series(name string, labels map[string]string) []*dto.Metric {
	f, ok := s[name]
	if !ok {
		return nil
	}
	var out []*dto.Metric
	for _, m := range f.GetMetric() {
		if hasLabels(m, labels) {
			out = append(out, m)
		}
	}
	return out
}

// Label returns the value of one label of a series ("" when absent).
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if Label(m, k) != v {
			return false
		}
	}
	return true
}
