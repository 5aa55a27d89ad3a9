package kubeletsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestEveryNodeHasItsOwnPortAndCertificate(t *testing.T) {
	s := startSim(t, Config{Nodes: 3})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CACertPEM())
	seen := map[int]bool{}
	for _, node := range s.Nodes() {
		port := s.Port(node)
		if port == 0 || seen[port] {
			t.Fatalf("node %s: port %d (seen %v)", node, port, seen)
		}
		seen[port] = true
		// The certificate verifies for the node's name and for its IP, as a kubelet's serving certificate does.
		for _, serverName := range []string{node, s.Host()} {
			conn, err := tls.Dial("tcp", net.JoinHostPort(s.Host(), strconv.Itoa(port)),
				&tls.Config{RootCAs: pool, ServerName: serverName, NextProtos: []string{"h2"}})
			if err != nil {
				t.Fatalf("node %s: TLS as %q: %v", node, serverName, err)
			}
			if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
				t.Errorf("node %s: negotiated %q, want h2", node, p)
			}
			_ = conn.Close()
		}
		resp, body := get(t, client(t, s), nodeURL(s, node, "/healthz"))
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			t.Errorf("node %s /healthz: %d %q", node, resp.StatusCode, body)
		}
	}
	if s.Port("no-such-node") != 0 {
		t.Error("Port of an unknown node is not 0")
	}
}

func TestNodeFaults(t *testing.T) {
	s := startSim(t, Config{Nodes: 2})
	c := client(t, s)
	bad, good := s.Nodes()[0], s.Nodes()[1]

	s.SetNodeFault(bad, Fault{Status: http.StatusInternalServerError, Body: []byte("boom")})
	if resp, body := get(t, c, nodeURL(s, bad, "/metrics/resource")); resp.StatusCode != 500 || string(body) != "boom" {
		t.Errorf("faulted node: %d %q, want 500 boom", resp.StatusCode, body)
	}
	scrape(t, s, c, good, "/metrics/resource") // other nodes unaffected

	s.SetNodeFault(bad, Fault{Body: []byte("not { prometheus")})
	if resp, body := get(t, c, nodeURL(s, bad, "/metrics/resource")); resp.StatusCode != 200 || string(body) != "not { prometheus" {
		t.Errorf("malformed-body fault: %d %q", resp.StatusCode, body)
	}

	// A delay longer than the client waits: the client times out, the server does not hang on to the request.
	s.SetNodeFault(bad, Fault{Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, nodeURL(s, bad, "/metrics/resource"), nil)
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("delayed node answered %d before the client's deadline", resp.StatusCode)
	}

	s.SetNodeFault(bad, Fault{})
	scrape(t, s, c, bad, "/metrics/resource")
}

func TestStopIsIdempotentAndClosesListeners(t *testing.T) {
	s, err := New(Config{Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
	addr := net.JoinHostPort(s.Host(), strconv.Itoa(s.Port(s.Nodes()[0])))
	s.Stop()
	s.Stop()
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Stop", addr)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Nodes: -1}, {Host: "localhost"}, {Host: "not-an-ip"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

func TestTruthHandlerServesTruth(t *testing.T) {
	s, err := New(Config{Nodes: 2, PodsPerNode: 2, Namespaces: 2})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.TruthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/truth", nil))
	var got Truth
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("truth JSON: %v: %s", err, rec.Body)
	}
	want := s.Truth()
	if len(got.Nodes) != 2 || len(got.Pods) != 4 {
		t.Fatalf("truth JSON has %d nodes, %d pods", len(got.Nodes), len(got.Pods))
	}
	for k, cs := range want.Pods {
		for cn, u := range cs {
			if got.Pods[k][cn] != u {
				t.Errorf("JSON truth of %s/%s = %+v, want %+v", k, cn, got.Pods[k][cn], u)
			}
		}
	}
	if p := s.Pods()[0]; p.Namespace != "sim-ns-0" || p.Name != "sim-pod-0-0" || p.Node != "sim-node-0" ||
		len(p.Containers) != 2 || p.Containers[0] != "app" || p.Containers[1] != "sidecar" {
		t.Errorf("first pod %+v", p)
	}
}

// Shards of one cluster, each in what would be its own process, serve between them every node, on the ports and
// with the certificates that a sim which only registers (never starts) publishes.
func TestShardsServeOneClusterWithOneCA(t *testing.T) {
	registrar, err := New(Config{Nodes: 5})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := registrar.CABundlePEM()
	if err != nil {
		t.Fatal(err)
	}
	var shards []*Sim
	// A fixed port range may be taken on a busy machine: try a few.
	for attempt := 0; attempt < 5 && shards == nil; attempt++ {
		base := 20000 + rand.IntN(10000)
		shards = startShards(t, Config{Nodes: 5, PortBase: base, Shards: 2, CA: bundle})
		registrar, _ = New(Config{Nodes: 5, PortBase: base, CA: bundle})
	}
	if shards == nil {
		t.Fatal("no free port range for the shards")
	}
	c := client(t, registrar) // trusts the registrar's CA only
	for i, node := range registrar.Nodes() {
		if got, want := registrar.Port(node), registrar.cfg.PortBase+i; got != want {
			t.Fatalf("unstarted sim: node %s on port %d, want %d", node, got, want)
		}
		// The node's own pods, so the port is this node's and not another's.
		resp, body := get(t, c, nodeURL(registrar, node, "/metrics/resource"))
		if pod := fmt.Sprintf(`pod="sim-pod-%d-0"`, i); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), pod) {
			t.Errorf("node %s through its shard: %d, body has %s: %v", node, resp.StatusCode, pod,
				strings.Contains(string(body), pod))
		}
		// Only the shard that owns the node listens on its port.
		for k, s := range shards {
			_, listens := s.server.byPort[registrar.Port(node)]
			if want := i%2 == k; listens != want {
				t.Errorf("shard %d listens for node %s: %v, want %v", k, node, listens, want)
			}
		}
	}
	if _, err := New(Config{Nodes: 2, Shards: 2, Shard: 2}); err == nil {
		t.Error("shard 2 of 2 was accepted")
	}
	if _, err := New(Config{Nodes: 2, CA: []byte("not a bundle")}); err == nil {
		t.Error("a CA that is no bundle was accepted")
	}
}

// startShards starts every shard of cfg, or none (nil) when a port is taken.
func startShards(t *testing.T, cfg Config) []*Sim {
	var out []*Sim
	for k := range cfg.Shards {
		cfg.Shard = k
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			for _, o := range out {
				o.Stop()
			}
			return nil
		}
		t.Cleanup(s.Stop)
		out = append(out, s)
	}
	return out
}
