package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestComponent runs the real server in-process and reads it as the aggregator would, with the metrics clientset:
// every served version answers alike, from one storage.
func TestComponent(t *testing.T) {
	ts := startTestServer(t)
	ctx := context.Background()

	for _, protobuf := range []bool{false, true} {
		for _, c := range ts.versionClients(t, protobuf) {
			at := fmt.Sprintf("%s protobuf=%v", c.version, protobuf)
			nodes, err := c.nodes(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("%s: list nodes: %v", at, err)
			}
			if len(nodes.Items) != 1 {
				t.Fatalf("%s: want node-a only (node-b has no metrics), got %d items", at, len(nodes.Items))
			}
			n := nodes.Items[0]
			assertUsage(t, "node-a", n.Usage, 250_000_000, 3<<30)
			if n.Name != "node-a" || n.Window.Duration != 15*time.Second || !n.Timestamp.Time.Equal(t0.Add(15*time.Second)) ||
				n.Labels["role"] != "worker" {
				t.Errorf("%s: node %+v", at, n.ObjectMeta)
			}

			all, err := c.pods(ctx, "", metav1.ListOptions{})
			if err != nil {
				t.Fatalf("%s: list pods: %v", at, err)
			}
			if got := podNames(all); got != "ns-a/web-1,ns-b/db-1" {
				t.Fatalf("%s: all pods %s", at, got)
			}
			web := all.Items[0]
			if len(web.Containers) != 2 {
				t.Fatalf("containers %+v", web.Containers)
			}
			assertUsage(t, "web-1/app", web.Containers[0].Usage, 100_000_000, 20<<20)
			assertUsage(t, "web-1/sidecar", web.Containers[1].Usage, 50_000_000, 5<<20)
			assertUsage(t, "db-1/app", all.Items[1].Containers[0].Usage, 1_500_000_000, 1<<30)

			nsB, err := c.pods(ctx, "ns-b", metav1.ListOptions{LabelSelector: "app=db"})
			if err != nil || podNames(nsB) != "ns-b/db-1" {
				t.Fatalf("%s: ns-b pods %v %v", at, podNames(nsB), err)
			}
			one, err := c.pod(ctx, "ns-a", "web-1")
			if err != nil || one.Name != "web-1" {
				t.Fatalf("%s: get web-1: %v", at, err)
			}
			_, err = c.pod(ctx, "ns-b", "pending-1")
			if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `"ns-b/pending-1" not found`) {
				t.Errorf("%s: pod without metrics: want 404 naming it, got %v", at, err)
			}
			_, err = c.node(ctx, "node-x")
			if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `nodemetrics.metrics.k8s.io "node-x" not found`) {
				t.Errorf("%s: missing node: want 404 naming it, got %v", at, err)
			}
		}
	}

	admin := ts.httpClient(t, "alice", []string{"system:masters"})
	type httpCase struct {
		name, path, accept string
		want               int
		body               []string // substrings of the body
	}
	const table = "application/json;as=Table;g=meta.k8s.io;v=v1"
	const aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	tests := []httpCase{
		{"group discovery prefers v1", "/apis/metrics.k8s.io", "", 200,
			[]string{`"versions":[{"groupVersion":"metrics.k8s.io/v1","version":"v1"},{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}]`,
				`"preferredVersion":{"groupVersion":"metrics.k8s.io/v1","version":"v1"}`}},
		{"aggregated discovery lists v1 first", "/apis", aggregated, 200,
			[]string{`"versions":[{"version":"v1","resources":[`, `{"version":"v1beta1","resources":[`}},
		{"openapi v2", "/openapi/v2", "application/json", 200,
			[]string{"io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics", "io.k8s.metrics.pkg.apis.metrics.v1beta1.ContainerMetrics",
				"io.k8s.metrics.pkg.apis.metrics.v1.PodMetrics", "io.k8s.metrics.pkg.apis.metrics.v1.ContainerMetrics",
				"/apis/metrics.k8s.io/v1/nodes", "/apis/metrics.k8s.io/v1beta1/nodes"}},
		{"readyz names its checks", "/readyz?verbose", "", 200, []string{"[+]" + checkInformerSync + " ok", "[+]" + checkMetricCollection + " ok"}},
		{"livez names its check", "/livez?verbose", "", 200, []string{"[+]" + checkCollectionTimely + " ok"}},
	}
	for _, v := range servedVersions {
		api, model := "/apis/metrics.k8s.io/"+v, "io.k8s.metrics.pkg.apis.metrics."+v
		tests = append(tests, []httpCase{
			{v + " invalid label selector", api + "/pods?labelSelector=" + url.QueryEscape("app in ("), "", 400, nil},
			{v + " unsupported field selector", api + "/namespaces/ns-a/pods?fieldSelector=spec.nodeName%3Dn", "", 400,
				[]string{"spec.nodeName"}},
			{v + " namespace field on nodes", api + "/nodes?fieldSelector=metadata.namespace%3Dx", "", 400,
				[]string{"metadata.namespace"}},
			{v + " field selector on name", api + "/pods?fieldSelector=metadata.name%3Ddb-1", "", 200,
				[]string{`"apiVersion":"metrics.k8s.io/` + v + `"`, `"name":"db-1"`}},
			{v + " pods table", api + "/namespaces/ns-a/pods", table, 200,
				[]string{`"kind":"Table"`, `"cells":["web-1","150m","25Mi","15s"]`}},
			{v + " nodes table", api + "/nodes", table, 200,
				[]string{`"name":"CPU"`, `"name":"Memory"`, `"name":"Window"`, `"cells":["node-a","250m","3072Mi","15s"]`}},
			{v + " protobuf negotiated", api + "/nodes", "application/vnd.kubernetes.protobuf", 200,
				[]string{"k8s\x00", "metrics.k8s.io/" + v + "\x12\x0fNodeMetricsList"}},
			{v + " discovery", api, "", 200, []string{`"groupVersion":"metrics.k8s.io/` + v + `"`, `"name":"nodes"`, `"name":"pods"`, `"kind":"PodMetrics"`}},
			{v + " openapi v3", "/openapi/v3" + api, "application/json", 200,
				[]string{model + ".NodeMetrics", model + ".PodMetrics", "Metrics for all containers are collected within the same time window."}},
		}...)
	}
	tests = append(tests, httpCase{"self metrics", "/metrics", "", 200, []string{
		"apiserver_request_duration_seconds", "metrics_ring_api_metric_freshness_seconds",
		`apiserver_request_total{code="200",component="apiserver",dry_run="",group="metrics.k8s.io",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"}`,
		`apiserver_request_total{code="200",component="apiserver",dry_run="",group="metrics.k8s.io",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1beta1"}`,
	}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, admin, ts.url+tc.path, tc.accept)
			if code != tc.want {
				t.Fatalf("GET %s: %d, want %d: %s", tc.path, code, tc.want, trim(body))
			}
			for _, s := range tc.body {
				if !strings.Contains(body, s) {
					t.Errorf("GET %s: body lacks %q: %s", tc.path, s, trim(body))
				}
			}
		})
	}

	t.Run("authorization", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			client *http.Client
			want   int
		}{
			{"user without rights", ts.httpClient(t, "bob", []string{"system:authenticated"}), http.StatusForbidden},
			{"no identity headers: anonymous", ts.httpClient(t, "", nil), http.StatusForbidden},
			{"admin", admin, http.StatusOK},
		} {
			if code, body := get(t, c.client, ts.url+"/apis/metrics.k8s.io/v1beta1/nodes", ""); code != c.want {
				t.Errorf("%s: %d, want %d: %s", c.name, code, c.want, trim(body))
			}
		}
	})
	t.Run("headers from an untrusted front proxy are ignored", func(t *testing.T) {
		cfg := ts.restConfig("alice", []string{"system:masters"})
		cfg.CertData, cfg.KeyData = ts.pki.otherCertPEM, ts.pki.otherKeyPEM
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: rt}
		code, body := get(t, c, ts.url+"/apis/metrics.k8s.io/v1beta1/nodes", "")
		if code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Fatalf("untrusted proxy got %d: %s", code, trim(body))
		}
	})

	// Collection stops succeeding: list and get are 503 naming the source and its error; discovery, OpenAPI and
	// readiness keep answering 200 so the APIService stays available.
	ts.clock.Set(t0.Add(2 * time.Minute))
	ts.store.BeginCycle().Commit(storage.Outcome{Err: errors.New("node-a: dial tcp 10.0.0.1:10250: connection refused")})
	for _, c := range ts.versionClients(t, false) {
		_, err := c.nodes(ctx, metav1.ListOptions{})
		if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "kubelet") || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("%s: want 503 naming the kubelet source and its error, got %v", c.version, err)
		}
		if _, err = c.pod(ctx, "ns-a", "web-1"); !apierrors.IsServiceUnavailable(err) {
			t.Fatalf("%s: get pod: want 503, got %v", c.version, err)
		}
	}
	for _, p := range []string{"/apis/metrics.k8s.io", "/apis/metrics.k8s.io/v1", "/apis/metrics.k8s.io/v1beta1", "/openapi/v2",
		"/openapi/v3/apis/metrics.k8s.io/v1", "/openapi/v3/apis/metrics.k8s.io/v1beta1", "/readyz", "/livez"} {
		if code, body := get(t, admin, ts.url+p, "application/json"); code != http.StatusOK {
			t.Errorf("GET %s while unavailable: %d: %s", p, code, trim(body))
		}
	}
}

func assertUsage(t *testing.T, what string, rl corev1.ResourceList, cpuNano, memBytes int64) {
	t.Helper()
	cpu, mem := rl[corev1.ResourceCPU], rl[corev1.ResourceMemory]
	if got := cpu.ScaledValue(-9); got != cpuNano {
		t.Errorf("%s: cpu %d nanocores, want %d", what, got, cpuNano)
	}
	if got := mem.Value(); got != memBytes {
		t.Errorf("%s: memory %d bytes, want %d", what, got, memBytes)
	}
}

func podNames(l *metrics.PodMetricsList) string {
	if l == nil {
		return ""
	}
	var s []string
	for _, p := range l.Items {
		s = append(s, p.Namespace+"/"+p.Name)
	}
	return strings.Join(s, ",")
}

func get(t *testing.T, c *http.Client, u, accept string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func trim(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}
