package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// pageThroughResult is one `kubectl get podmetrics -A` (issue 26 finding 3): how long it took, the rows it
// printed, and what it cost the server, from the server's own metrics.
type pageThroughResult struct {
	elapsed               time.Duration
	rows                  int
	lists, builds, cycles float64 // pod LIST requests (pages), builds made, collection cycles meanwhile
	continuedFromNewest   float64
	err                   string
}

// sumWhere adds the series of metric name whose labels hold every one of parts (e.g. `verb="LIST"`).
func (s samples) sumWhere(name string, parts ...string) float64 {
	var v float64
	for k, x := range s {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(k, p)
		}
		if all {
			v += x
		}
	}
	return v
}

// runPageThrough runs `kubectl get podmetrics -A --chunk-size=CHUNK` as the admin, through the aggregator (as a
// user would), counting its output rows as they stream, and reads metrics-ring's /metrics around it: the pod lists
// it asked for (one a page), and the builds they made.
func runPageThrough(ctx context.Context, o options, t target, b *framework.Backend, cp *framework.ControlPlane,
	direct *http.Client) (*pageThroughResult, error) {
	r := &pageThroughResult{}
	fmt.Fprintf(os.Stderr, "%s: kubectl get podmetrics -A --chunk-size=%d (%d pods)...\n", t.name, o.pageChunk, o.nodes*o.pods)
	m0, err := scrapeMetrics(ctx, direct, b.URL())
	if err != nil {
		return nil, err
	}
	kctx, cancel := context.WithTimeout(ctx, o.pageTimeout)
	defer cancel()
	cmd := exec.CommandContext(kctx, cp.Tools.Kubectl, "--kubeconfig="+cp.AdminKubeconfig, "get", "podmetrics", "-A",
		fmt.Sprintf("--chunk-size=%d", o.pageChunk), "--request-timeout=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kubectl: %w", err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "NAMESPACE ") {
			r.rows++
		}
	}
	if err := cmd.Wait(); err != nil {
		r.err = fmt.Sprintf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	r.elapsed = time.Since(start)
	m1, err := scrapeMetrics(ctx, direct, b.URL())
	if err != nil {
		return nil, err
	}
	list := func(s samples) float64 {
		return s.sumWhere("apiserver_request_total", `resource="pods"`, `verb="LIST"`, `group="metrics.k8s.io"`)
	}
	r.lists = list(m1) - list(m0)
	r.builds = m1.value(buildsTotal) - m0.value(buildsTotal)
	r.cycles = m1.value(t.collection+"_count") - m0.value(t.collection+"_count")
	r.continuedFromNewest = m1.sumOf("metrics_ring_api_continued_from_newest_total") - m0.sumOf("metrics_ring_api_continued_from_newest_total")
	fmt.Fprintf(os.Stderr, "%s: kubectl get podmetrics -A: %d rows in %s, %.0f pages, %.0f builds %s\n",
		t.name, r.rows, r.elapsed.Round(time.Millisecond), r.lists, r.builds, r.err)
	return r, nil
}

// printPageThrough prints the page-through's row for each target that ran it.
func (r *result) printPageThrough(t table) {
	o := r.opts
	fmt.Fprintln(t.tw)
	fmt.Fprintf(t.tw, "kubectl get podmetrics -A --chunk-size=%d (as the admin, through kube-apiserver), %d pods\n", o.pageChunk, o.nodes*o.pods)
	t.header("page-through measure")
	p := func(f func(*pageThroughResult) float64) func(*targetResult) float64 {
		return func(tr *targetResult) float64 {
			if tr.pageThrough == nil {
				return math.NaN()
			}
			return f(tr.pageThrough)
		}
	}
	t.row("completed (exit 0)", false, yesNo, p(func(r *pageThroughResult) float64 { return b2f(r.err == "") }))
	t.row("rows printed", false, count, p(func(r *pageThroughResult) float64 { return float64(r.rows) }))
	t.row("elapsed", false, secs, p(func(r *pageThroughResult) float64 { return r.elapsed.Seconds() }))
	t.row("pod LIST requests (pages)", false, count, p(func(r *pageThroughResult) float64 { return r.lists }))
	t.row("builds made meanwhile", false, count, p(func(r *pageThroughResult) float64 { return r.builds }))
	t.row("collection cycles meanwhile", false, count, p(func(r *pageThroughResult) float64 { return r.cycles }))
	t.row("pages continued from the newest snapshot", false, count, p(func(r *pageThroughResult) float64 { return r.continuedFromNewest }))
	for _, tr := range t.targets {
		if tr.pageThrough != nil && tr.pageThrough.err != "" {
			fmt.Fprintf(t.tw, "  %s: %s\n", tr.name, tr.pageThrough.err)
		}
	}
}
