package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PrometheusTarget is one simulated kubelet a Prometheus scrapes: its node name (the target's "node" label)
// and its host:port. Its serving certificate must hold the host as an IP SAN: that is what Prometheus verifies.
type PrometheusTarget struct {
	Node, Address string
}

// PrometheusConfig describes a Prometheus scraping kubelets the way kube-prometheus does: one job for
// /metrics/resource and one for /metrics/cadvisor, over https, every target labelled with its node.
type PrometheusConfig struct {
	// Binary is the prometheus executable (see EnsurePrometheus).
	Binary string
	// Dir holds the generated config, the TSDB and the log; created if missing.
	Dir string
	// CAFile verifies the kubelets' serving certificates.
	CAFile  string
	Targets []PrometheusTarget
	// ScrapeInterval defaults to 1s.
	ScrapeInterval time.Duration
	// ExternalLabels are the global external_labels, which a Thanos sidecar needs to tell its Prometheus apart.
	// Prometheus' own query API does not add them to its answers.
	ExternalLabels map[string]string
	// Out receives progress lines; nil discards them.
	Out io.Writer
}

// Prometheus is a real Prometheus server on a free 127.0.0.1 port. Stop and Start keep its data directory
// and port, as a restarted Prometheus pod keeps its volume and Service.
type Prometheus struct {
	Proc *Process
	// URL is its HTTP API, e.g. http://127.0.0.1:40123.
	URL string
	// DataDir is its TSDB directory.
	DataDir string
	hc      *http.Client
}

// StartPrometheus writes the config and starts Prometheus on a free loopback port; see WaitReady.
func StartPrometheus(cfg PrometheusConfig) (*Prometheus, error) {
	if cfg.ScrapeInterval == 0 {
		cfg.ScrapeInterval = time.Second
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", cfg.Dir, err)
	}
	file := filepath.Join(cfg.Dir, "prometheus.yml")
	if err := os.WriteFile(file, []byte(prometheusYAML(cfg)), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", file, err)
	}
	port, err := FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p := &Prometheus{URL: "http://" + addr, DataDir: filepath.Join(cfg.Dir, "data"), hc: &http.Client{Timeout: 10 * time.Second}}
	p.Proc = NewProcess(cfg.Dir, "prometheus", cfg.Binary,
		"--config.file="+file,
		"--web.listen-address="+addr,
		"--storage.tsdb.path="+p.DataDir,
		// Debian's defaults point at /usr/share/prometheus; the API needs neither consoles nor the UI.
		"--web.console.templates="+cfg.Dir, "--web.console.libraries="+cfg.Dir,
		"--log.level=info")
	fmt.Fprintf(cfg.Out, "starting prometheus on %s scraping %d kubelets\n", p.URL, len(cfg.Targets))
	return p, p.Proc.Start()
}

// prometheusYAML is the scrape config. Targets are addressed by IP, which their certificates carry as a SAN,
// so one tls_config fits every node.
func prometheusYAML(cfg PrometheusConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n",
		promDuration(cfg.ScrapeInterval), promDuration(cfg.ScrapeInterval), promDuration(cfg.ScrapeInterval))
	if len(cfg.ExternalLabels) > 0 {
		b.WriteString("  external_labels:\n")
		for _, k := range slices.Sorted(maps.Keys(cfg.ExternalLabels)) {
			fmt.Fprintf(&b, "    %s: %q\n", k, cfg.ExternalLabels[k])
		}
	}
	b.WriteString("scrape_configs:\n")
	for _, job := range []struct{ name, path string }{
		{"kubelet-resource", "/metrics/resource"}, {"kubelet-cadvisor", "/metrics/cadvisor"},
	} {
		fmt.Fprintf(&b, "- job_name: %s\n  scheme: https\n  metrics_path: %s\n  tls_config:\n    ca_file: %q\n  static_configs:\n",
			job.name, job.path, cfg.CAFile)
		for _, t := range cfg.Targets {
			fmt.Fprintf(&b, "  - targets: [%q]\n    labels:\n      node: %q\n", t.Address, t.Node)
		}
	}
	return b.String()
}

// promDuration renders d in Prometheus' duration syntax (whole milliseconds).
func promDuration(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

// Start starts a stopped Prometheus again with the same flags, port and data directory.
func (p *Prometheus) Start() error { return p.Proc.Start() }

// Stop stops Prometheus (SIGTERM, so it closes its TSDB cleanly).
func (p *Prometheus) Stop() { p.Proc.Stop(stopGrace) }

// WaitReady waits until /-/ready answers 200 and every target has been scraped successfully, failing fast if
// the process exits.
func (p *Prometheus) WaitReady(ctx context.Context, timeout time.Duration) error {
	return Poll(ctx, "prometheus at "+p.URL+" ready with every target up", 250*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		if exited, err := p.Proc.Exited(); exited {
			return false, StopPolling(fmt.Errorf("prometheus exited: %v; log: %s", err, p.Proc.LogFile))
		}
		code, body, err := getStatus(ctx, p.hc, p.URL+"/-/ready")
		if err != nil {
			return false, err
		}
		if code != http.StatusOK {
			return false, fmt.Errorf("/-/ready: status %d: %s", code, tailLines([]byte(body), 3))
		}
		return p.targetsUp(ctx)
	})
}

func (p *Prometheus) targetsUp(ctx context.Context) (bool, error) {
	var targets struct {
		ActiveTargets []struct {
			ScrapeURL string `json:"scrapeUrl"`
			Health    string `json:"health"`
			LastError string `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := p.api(ctx, "/api/v1/targets?state=active", &targets); err != nil {
		return false, err
	}
	if len(targets.ActiveTargets) == 0 {
		return false, errors.New("no active targets yet")
	}
	for _, t := range targets.ActiveTargets {
		if t.Health != "up" {
			return false, fmt.Errorf("target %s is %q: %s", t.ScrapeURL, t.Health, t.LastError)
		}
	}
	return true, nil
}

// PromSample is one element of an instant vector.
type PromSample struct {
	Metric map[string]string
	Value  float64
}

// Query runs an instant PromQL query now and returns its vector.
func (p *Prometheus) Query(ctx context.Context, promql string) ([]PromSample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.api(ctx, "/api/v1/query?query="+url.QueryEscape(promql), &data); err != nil {
		return nil, fmt.Errorf("query %s: %w", promql, err)
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %q, want vector", promql, data.ResultType)
	}
	out := make([]PromSample, 0, len(data.Result))
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v: %w", promql, r.Value[1], err)
		}
		out = append(out, PromSample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// api GETs an API path and decodes the data field of a successful answer into data.
func (p *Prometheus) api(ctx context.Context, path string, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	if err != nil {
		return err
	}
	r, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	// Unlike getStatus, read whole answers (up to a bound): a cut-off vector would not decode.
	raw, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", path, err)
	}
	code, body := r.StatusCode, string(raw)
	var resp struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		return fmt.Errorf("%s: status %d, undecodable body %q: %w", path, code, tailLines([]byte(body), 3), err)
	}
	if code != http.StatusOK || resp.Status != "success" {
		return fmt.Errorf("%s: status %d: %s", path, code, resp.Error)
	}
	return json.Unmarshal(resp.Data, data)
}
