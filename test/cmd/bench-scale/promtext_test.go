package main

import (
	"math"
	"testing"
)

func TestHistogramQuantileWhere(t *testing.T) {
	before := samples{
		`d_bucket{scope="namespace",verb="LIST",le="0.1"}`:  10,
		`d_bucket{scope="namespace",verb="LIST",le="1"}`:    10,
		`d_bucket{scope="namespace",verb="LIST",le="+Inf"}`: 10,
	}
	after := samples{
		// namespace: 90 of 100 new ones within 0.1 s, 10 within 1 s.
		`d_bucket{scope="namespace",verb="LIST",le="0.1"}`:  100,
		`d_bucket{scope="namespace",verb="LIST",le="1"}`:    110,
		`d_bucket{scope="namespace",verb="LIST",le="+Inf"}`: 110,
		// cluster: all 10 above 1 s.
		`d_bucket{scope="cluster",verb="LIST",le="0.1"}`:  0,
		`d_bucket{scope="cluster",verb="LIST",le="1"}`:    0,
		`d_bucket{scope="cluster",verb="LIST",le="+Inf"}`: 10,
	}
	for _, tc := range []struct {
		name  string
		q     float64
		parts []string
		want  float64
	}{
		{"namespace p50", 0.5, []string{`scope="namespace"`}, 0.1 * 50 / 90},
		{"namespace p99", 0.99, []string{`scope="namespace"`}, 0.1 + 0.9*(99-90)/10},
		{"cluster p50", 0.5, []string{`scope="cluster"`}, math.Inf(1)},
		{"both p50: 100 of 110 within 1 s", 0.5, nil, 0.1 * 55 / 90},
		{"none", 0.5, []string{`scope="resource"`}, math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := histogramQuantileWhere(before, after, "d", tc.q, tc.parts...)
			if !(math.Abs(got-tc.want) < 1e-9 || got == tc.want || (math.IsNaN(got) && math.IsNaN(tc.want))) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
