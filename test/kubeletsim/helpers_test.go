package kubeletsim

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// startSim starts a sim on loopback and stops it when the test ends.
func startSim(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		cancel()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { cancel(); s.Stop() })
	return s
}

// client trusts only the sim's CA and speaks HTTP/2, as metrics-ring's scraper does.
func client(t *testing.T, s *Sim) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CACertPEM()) {
		t.Fatal("CACertPEM is not a PEM certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func nodeURL(s *Sim, node, path string) string {
	return "https://" + net.JoinHostPort(s.Host(), strconv.Itoa(s.Port(node))) + path
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return resp, body
}

// scrape fetches and parses one endpoint of one node.
func scrape(t *testing.T, s *Sim, c *http.Client, node, path string) (map[string]*dto.MetricFamily, []byte) {
	t.Helper()
	resp, body := get(t, c, nodeURL(s, node, path))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s on %s: status %d: %s", path, node, resp.StatusCode, body)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("GET %s on %s: protocol %s, want HTTP/2", path, node, resp.Proto)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing %s of %s: %v\n%s", path, node, err, body)
	}
	return mfs, body
}

// series indexes a family's samples by the values of the given labels, joined with "/".
func series(mf *dto.MetricFamily, labels ...string) map[string]*dto.Metric {
	out := map[string]*dto.Metric{}
	if mf == nil {
		return out
	}
	for _, m := range mf.GetMetric() {
		var k string
		for i, l := range labels {
			if i > 0 {
				k += "/"
			}
			k += labelValue(m, l)
		}
		out[k] = m
	}
	return out
}

func labelValue(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// rateBetween is the CPU rate in nanocores between two samples of a counter family, from their own timestamps.
func rateBetween(t *testing.T, a, b *dto.Metric) float64 {
	t.Helper()
	dt := float64(b.GetTimestampMs()-a.GetTimestampMs()) / 1e3
	if dt <= 0 {
		t.Fatalf("sample timestamps do not advance: %d then %d", a.GetTimestampMs(), b.GetTimestampMs())
	}
	return (value(b) - value(a)) / dt * 1e9
}

// scrapeTwice scrapes a node until the second sample's timestamp is at least 100 ms after the first, so rates
// are measured over a useful interval. Bounded: at most 100 attempts.
func scrapeTwice(t *testing.T, s *Sim, c *http.Client, node, path string) (a, b map[string]*dto.MetricFamily) {
	t.Helper()
	a, _ = scrape(t, s, c, node, path)
	first := a["node_cpu_usage_seconds_total"].GetMetric()[0].GetTimestampMs()
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		b, _ = scrape(t, s, c, node, path)
		if b["node_cpu_usage_seconds_total"].GetMetric()[0].GetTimestampMs() >= first+100 {
			return a, b
		}
	}
	t.Fatal("node sample timestamps did not advance by 100 ms in 100 scrapes")
	return nil, nil
}

func within(got, want, tolerance float64) bool {
	if want == 0 {
		return got == 0
	}
	d := (got - want) / want
	return d <= tolerance && d >= -tolerance
}

func podKey(ns, pod string) string { return fmt.Sprintf("%s/%s", ns, pod) }

type dmf = dto.MetricFamily
