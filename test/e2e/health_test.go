package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// hangingKubelet is a kubelet whose /metrics/resource answers only when released: TLS completes (its CA is
// trusted), so the scrape waits on the response, bounded by metrics-ring's --kubelet-request-timeout.
type hangingKubelet struct {
	srv     *httptest.Server
	arrived chan struct{}
	release chan struct{}
}

func startHangingKubelet(t *testing.T, dir string) (*hangingKubelet, *framework.CA) {
	t.Helper()
	ca, err := framework.NewCA(dir, "hanging-kubelet-ca")
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(dir, "hanging-kubelet", framework.CertSpec{CommonName: "hang", Server: true, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	h := &hangingKubelet{arrived: make(chan struct{}, 1), release: make(chan struct{})}
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case h.arrived <- struct{}{}:
		default:
		}
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		http.Error(w, "released", http.StatusServiceUnavailable)
	}))
	h.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	h.srv.StartTLS()
	t.Cleanup(func() {
		h.unblock()
		h.srv.Close()
	})
	return h, ca
}

func (h *hangingKubelet) unblock() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// TestReadyzWaitsForFirstCollection starts a second metrics-ring while one kubelet hangs: /readyz must fail
// while the first collection is still running, go on failing after it (the answer is missing that kubelet's node)
// and name the nodes served, and pass within collect.ReadyWithinCycles cycles even though that kubelet never answers.
func TestReadyzWaitsForFirstCollection(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	hang, hangCA := startHangingKubelet(t, dir)
	port := hang.srv.Listener.Addr().(*net.TCPAddr).Port

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "e2e-hanging-node"}}
	node, err := env.cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.cp.Client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
	node.Status = corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
		Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Capacity:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Allocatable:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
	}
	if _, err := env.cp.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Trust both the simulator's CA and the hanging kubelet's.
	bundle := filepath.Join(dir, "kubelet-cas.crt")
	simCA, err := os.ReadFile(env.simCA)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, append(append(simCA, '\n'), hangCA.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	// The request timeout must stay below the resolution (metrics-server's rule); it is long enough that the
	// release below ends the first collection, and the resolution short enough that the readiness bound (4
	// cycles) comes within the test's wait.
	b, err := env.api.StartBackend(ctx, framework.BackendConfig{
		Service: "metrics-ring-readyz", IP: "127.0.0.4", Resolution: 10 * time.Second,
		Args: append(framework.KubeletSourceArgs(bundle), "--kubelet-request-timeout=8s"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Proc.Stop(10 * time.Second) })

	err = framework.Poll(ctx, "metrics-ring to scrape the hanging kubelet", 100*time.Millisecond, 2*time.Minute, func(context.Context) (bool, error) {
		if exited, err := b.Proc.Exited(); exited {
			return false, framework.StopPolling(fmt.Errorf("metrics-ring exited: %v", err))
		}
		select {
		case <-hang.arrived:
			return true, nil
		default:
			return false, nil
		}
	})
	if err != nil {
		t.Fatalf("%v; log tail:\n%s", err, b.Proc.Tail(30))
	}
	// The first collection cannot have finished: one of its scrapes is waiting on us.
	code, body, err := b.Get(ctx, "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	if code == http.StatusOK {
		t.Fatalf("/readyz is 200 while the first collection is still running:\n%s", body)
	}
	if !strings.Contains(body, "[-]") {
		t.Fatalf("/readyz?verbose does not name the failing check:\n%s", body)
	}
	t.Logf("/readyz during the first collection (%d):\n%s", code, body)

	hang.unblock() // from now on it answers 503 at once: its node is never served
	// /readyz withholds its reasons, so the cycles come from /metrics: read before and after /readyz, they bound
	// the cycles finished when it answered.
	cycles := func(ctx context.Context) (uint64, error) {
		m, err := b.SelfMetrics(ctx)
		if err != nil {
			return 0, err
		}
		var n uint64
		for _, s := range m.Series("metrics_ring_kubelet_collection_duration_seconds", nil) {
			n += s.GetHistogram().GetSampleCount()
		}
		return n, nil
	}
	const bound = 4 // collect.ReadyWithinCycles
	framework.Eventually(t, "/readyz to fail after the first collection", time.Minute, func(ctx context.Context) error {
		before, err := cycles(ctx)
		if err != nil {
			return err
		}
		code, body, err := b.Get(ctx, "/readyz?verbose")
		if err != nil {
			return err
		}
		after, err := cycles(ctx)
		if err != nil {
			return err
		}
		if code == http.StatusOK && after < bound {
			t.Fatalf("/readyz is 200 after %d collections, one node never served: want it to wait for %d", after, bound)
		}
		if before < 1 || code == http.StatusOK {
			return fmt.Errorf("/readyz %d after %d collections", code, before)
		}
		t.Logf("/readyz after %d collections (%d):\n%s", before, code, body)
		return nil
	})
	if err := b.WaitReady(ctx, 2*time.Minute); err != nil {
		t.Fatalf("%v; log tail:\n%s", err, b.Proc.Tail(30))
	}
	if n, err := cycles(ctx); err != nil || n < bound {
		t.Fatalf("ready after %d collections (%v), one node never served: want %d", n, err, bound)
	}
	if code, body, err = b.Get(ctx, "/readyz?verbose"); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz?verbose after %d collections (the readiness bound): %d %v\n%s", bound, code, err, body)
	}
}

// TestKillAndRestart kills metrics-ring as a crash would; the API is unavailable while it is down and comes
// back, with the truth, after a restart.
func TestKillAndRestart(t *testing.T) {
	ctx := context.Background()
	alloc := nodeAllocatable(t)
	env.kubelet.Proc.Kill()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = env.kubelet.Restart()
		}
	})
	framework.Eventually(t, "kubectl top nodes to fail while metrics-ring is down", time.Minute, func(ctx context.Context) error {
		if out, err := env.cp.Kubectl(ctx, "", "top", "nodes"); err == nil {
			return fmt.Errorf("kubectl top nodes still answers:\n%s", out)
		}
		return nil
	})
	if err := env.kubelet.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	if err := env.kubelet.WaitReady(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := env.api.WaitAvailable(ctx, env.kubelet, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "kubectl top nodes after the restart", settle, func(ctx context.Context) error {
		return env.cp.TopNodesMatchTruth(ctx, env.sim.Truth().Nodes, alloc)
	})
}

// TestAPIServerRestart restarts kube-apiserver under a running metrics-ring: its informers reconnect, the
// APIService becomes Available again and kubectl top keeps telling the truth.
func TestAPIServerRestart(t *testing.T) {
	ctx := context.Background()
	alloc := nodeAllocatable(t)
	if err := env.cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.api.WaitAvailable(ctx, env.kubelet, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "kubectl top nodes after the kube-apiserver restart", settle, func(ctx context.Context) error {
		return env.cp.TopNodesMatchTruth(ctx, env.sim.Truth().Nodes, alloc)
	})
	if _, err := env.metrics.MetricsV1beta1().NodeMetricses().Get(ctx, "no-such-node", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("GET of a node that does not exist: %v, want 404 NotFound", err)
	}
}
