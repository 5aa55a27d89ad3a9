package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ThanosVersion is the Thanos the Prometheus source is tested against, built from the Go module proxy. v0.42.5
// asks for go 1.26.10 in its go.mod; v0.42.4 builds with any go1.26.
const ThanosVersion = "v0.42.4"

const thanosModule = "github.com/thanos-io/thanos"

// EnsureThanos builds thanos ThanosVersion into cacheDir when missing (the path carries the version, so a bump
// rebuilds) and returns its path. Thanos' go.mod has replace directives, which `go install pkg@version` refuses,
// so the module is downloaded (`go mod download`) and built inside its own directory: its go.mod and go.sum
// decide every dependency, unchanged, and none of them meets the test module's.
func EnsureThanos(cacheDir string, out io.Writer) (string, error) {
	return cachedBuild(cacheDir, "thanos-"+ThanosVersion, "thanos", out, func(dst string) error { return buildThanos(dst, out) })
}

func buildThanos(dst string, out io.Writer) error {
	tmp, err := buildDir(dst)
	if err != nil {
		return fmt.Errorf("thanos: %w", err)
	}
	defer os.RemoveAll(tmp)
	// GOFLAGS from the caller would not apply to Thanos' module and GOWORK=off keeps a workspace out of it;
	// GOTOOLCHAIN=local makes a too old go say so rather than fetch another toolchain.
	env := append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local")
	start := time.Now()
	mod := thanosModule + "@" + ThanosVersion
	fmt.Fprintf(out, "building thanos %s (first time: about 7 minutes on 2 cores, downloads included): "+
		"go mod download -json %s, then go build -tags=netgo,slicelabels ./cmd/thanos in that module's directory "+
		"with its own go.mod (GOFLAGS=-mod=readonly), outside test/go.mod\n", ThanosVersion, mod)
	src, err := moduleSource(tmp, append(env, "GOFLAGS="), thanosModule, ThanosVersion)
	if err != nil {
		return err
	}
	// The tags of Thanos' own release build (.promu.yml): Thanos casts Prometheus' labels.Labels to its protobuf
	// labels without copying, which holds only for the slicelabels layout; without the tag the sidecar's
	// StoreAPI reads strings from the wrong memory and crashes on its first Info call.
	args := []string{"build", "-trimpath", "-tags=netgo,slicelabels", "-o", filepath.Join(tmp, "thanos"),
		"-ldflags=-X github.com/prometheus/common/version.Version=" + strings.TrimPrefix(ThanosVersion, "v"),
		"./cmd/thanos"}
	fmt.Fprintf(out, "go %v in %s\n", args, src)
	cmd := exec.Command("go", args...)
	cmd.Dir = src
	cmd.Env = append(env, "GOFLAGS=-mod=readonly")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s/cmd/thanos in %s: %w", mod, src, err)
	}
	if err := os.Rename(filepath.Join(tmp, "thanos"), dst); err != nil {
		return fmt.Errorf("installing %s: %w", dst, err)
	}
	fmt.Fprintf(out, "built %s in %s\n", dst, time.Since(start).Round(time.Second))
	return nil
}

// ThanosConfig describes Thanos Query in front of one Prometheus through a Thanos sidecar, as Thanos is deployed
// next to a Prometheus pod.
type ThanosConfig struct {
	// Binary is the thanos executable (see EnsureThanos).
	Binary string
	// Dir holds the logs and the Query's endpoint config; created if missing.
	Dir string
	// Prometheus is the Prometheus the sidecar reads; it must have external labels (the sidecar refuses to start
	// without: they tell stores apart).
	Prometheus *Prometheus
	// Out receives progress lines; nil discards them.
	Out io.Writer
}

// Thanos is a Thanos sidecar and a Thanos Query, every port on 127.0.0.1. The Query reads its endpoints from a
// file it re-reads every second, so a test can add and remove stores without a restart (SetUnreachableStore).
type Thanos struct {
	Sidecar, Query *Process
	// URL is Thanos Query's Prometheus-compatible HTTP API, e.g. http://127.0.0.1:40123.
	URL string
	// sidecarGRPC is the sidecar's StoreAPI address; endpoints is the Query's endpoint config file.
	sidecarGRPC, endpoints string
	hc                     *http.Client
}

// StartThanos starts the sidecar and the Query; see WaitReady.
func StartThanos(cfg ThanosConfig) (*Thanos, error) {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", cfg.Dir, err)
	}
	ports, err := FreePorts(4, "127.0.0.1")
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(ports)) // sidecar gRPC, sidecar HTTP, query HTTP, query gRPC
	for i, port := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	t := &Thanos{URL: "http://" + addrs[2], sidecarGRPC: addrs[0], endpoints: filepath.Join(cfg.Dir, "endpoints.yml"),
		hc: &http.Client{Timeout: 10 * time.Second}}
	if err := t.SetUnreachableStore(""); err != nil {
		return nil, err
	}
	t.Sidecar = NewProcess(cfg.Dir, "thanos-sidecar", cfg.Binary, "sidecar",
		"--prometheus.url="+cfg.Prometheus.URL, "--tsdb.path="+cfg.Prometheus.DataDir,
		"--grpc-address="+addrs[0], "--http-address="+addrs[1], "--log.level=info")
	t.Query = NewProcess(cfg.Dir, "thanos-query", cfg.Binary, "query",
		"--http-address="+addrs[2], "--grpc-address="+addrs[3],
		"--endpoint.sd-config-file="+t.endpoints, "--endpoint.sd-config-reload-interval=1s",
		// Thanos' default, set to say what the tests rely on: a failing store is a warning, not an error.
		"--query.partial-response", "--log.level=info")
	fmt.Fprintf(cfg.Out, "starting thanos sidecar (StoreAPI %s) for %s and thanos query on %s\n", addrs[0], cfg.Prometheus.URL, t.URL)
	if err := t.Sidecar.Start(); err != nil {
		return nil, err
	}
	if err := t.Query.Start(); err != nil {
		t.Sidecar.Stop(stopGrace)
		return nil, err
	}
	return t, nil
}

// SetUnreachableStore rewrites the Query's endpoints: the sidecar, plus, unless addr is "", a strict endpoint at
// addr. Thanos queries a strict endpoint even when its health checks fail, so with nothing listening at addr every
// query fans out to a store that is down and, partial responses being allowed, answers with the sidecar's data
// and a warning. The Query picks the change up within seconds.
func (t *Thanos) SetUnreachableStore(addr string) error {
	cfg := fmt.Sprintf("endpoints:\n- address: %q\n", t.sidecarGRPC)
	if addr != "" {
		cfg += fmt.Sprintf("- address: %q\n  strict: true\n", addr)
	}
	tmp := t.endpoints + ".tmp"
	if err := os.WriteFile(tmp, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, t.endpoints); err != nil {
		return fmt.Errorf("writing %s: %w", t.endpoints, err)
	}
	return nil
}

// Stop stops the Query, then the sidecar.
func (t *Thanos) Stop() {
	t.Query.Stop(stopGrace)
	t.Sidecar.Stop(stopGrace)
}

// WaitReady waits until the Query answers promql with at least one series through the sidecar, failing fast if
// either process exits.
func (t *Thanos) WaitReady(ctx context.Context, promql string, timeout time.Duration) error {
	return Poll(ctx, "thanos query at "+t.URL+" answering "+promql+" through the sidecar", 250*time.Millisecond, timeout, func(ctx context.Context) (bool, error) {
		for _, p := range []*Process{t.Sidecar, t.Query} {
			if exited, err := p.Exited(); exited {
				return false, StopPolling(fmt.Errorf("%s exited: %v; log: %s", p.Name, err, p.LogFile))
			}
		}
		res, err := t.query(ctx, promql)
		if err != nil {
			return false, err
		}
		if res.n == 0 {
			return false, fmt.Errorf("no series yet (warnings %q)", res.warnings)
		}
		return true, nil
	})
}

// Warnings runs an instant query and returns the warnings the Query answered with.
func (t *Thanos) Warnings(ctx context.Context, promql string) ([]string, error) {
	res, err := t.query(ctx, promql)
	return res.warnings, err
}

type thanosResult struct {
	n        int
	warnings []string
}

func (t *Thanos) query(ctx context.Context, promql string) (thanosResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL+"/api/v1/query?query="+url.QueryEscape(promql), nil)
	if err != nil {
		return thanosResult{}, err
	}
	r, err := t.hc.Do(req)
	if err != nil {
		return thanosResult{}, err
	}
	defer r.Body.Close()
	var resp struct {
		Status   string   `json:"status"`
		Error    string   `json:"error"`
		Warnings []string `json:"warnings"`
		Data     struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&resp); err != nil {
		return thanosResult{}, fmt.Errorf("query %s: status %d: %w", promql, r.StatusCode, err)
	}
	if r.StatusCode != http.StatusOK || resp.Status != "success" {
		return thanosResult{}, fmt.Errorf("query %s: status %d: %s", promql, r.StatusCode, resp.Error)
	}
	return thanosResult{n: len(resp.Data.Result), warnings: resp.Warnings}, nil
}
