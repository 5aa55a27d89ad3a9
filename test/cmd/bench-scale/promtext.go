package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// samples is one scrape of metrics-ring's /metrics: series (name plus labels, as printed) to value.
type samples map[string]float64

func (s samples) value(series string) float64 { return s[series] }

// scrapeMetrics reads metrics-ring's own /metrics (the admin client is authorized for it) in the text format.
func scrapeMetrics(ctx context.Context, hc *http.Client, base string) (samples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading metrics-ring /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading metrics-ring /metrics: status %d", resp.StatusCode)
	}
	out := samples{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		// Label values here never hold spaces: the value is the last field (no timestamps are written).
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics-ring /metrics: %w", err)
	}
	return out, nil
}

// histogramQuantile estimates the q-quantile of the observations histogram name received between two
// scrapes, interpolating linearly inside a bucket as PromQL's histogram_quantile does. It is NaN when
// nothing was observed and +Inf when the quantile falls in the +Inf bucket.
func histogramQuantile(before, after samples, name string, q float64) float64 {
	return histogramQuantileWhere(before, after, name, q)
}

// histogramQuantileWhere is histogramQuantile over the series of name whose labels hold every one of parts
// (e.g. `scope="namespace"`), their buckets added up by bound.
func histogramQuantileWhere(before, after samples, name string, q float64, parts ...string) float64 {
	type bucket struct{ le, count float64 }
	byLE := map[float64]float64{}
	for series, v := range after {
		rest, ok := strings.CutPrefix(series, name+"_bucket{")
		i := strings.LastIndex(rest, `le="`)
		if !ok || i < 0 {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(rest[i+len(`le="`):], `"}`), 64)
		if err != nil {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(rest[:i], p)
		}
		if all {
			byLE[le] += v - before[series]
		}
	}
	var bs []bucket
	for le, n := range byLE {
		bs = append(bs, bucket{le, n})
	}
	slices.SortFunc(bs, func(a, b bucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	if len(bs) == 0 || bs[len(bs)-1].count <= 0 {
		return math.NaN()
	}
	rank := q * bs[len(bs)-1].count
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return b.le
			}
			if b.count == below {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/(b.count-below)
		}
		lower, below = b.le, b.count
	}
	return math.Inf(1)
}
