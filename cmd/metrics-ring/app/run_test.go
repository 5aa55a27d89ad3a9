package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// fixture is the wired process (informers over a fake client holding node-1, its pod ns/p1 and ns/p2 of node-2,
// storage, the real
// kubelet scraper against an httptest kubelet, the API server on 127.0.0.1), running until stop, the test's
// SIGTERM, is called.
type fixture struct {
	w       *Wired
	addr    string
	kube    *fake.Clientset
	scrapes *atomic.Int64
	stop    context.CancelFunc
	done    chan error
	exited  bool
	err     error
}

// startFixture wires and runs the process with args added to the flags it needs; the test's end stops it.
func startFixture(t *testing.T, args ...string) *fixture {
	t.Helper()
	return startFixtureWith(t, nil, args...)
}

// startFixtureWith is startFixture with a hook that may add reactors to the fake clientset before it is wired.
func startFixtureWith(t *testing.T, hook func(*fake.Clientset), args ...string) *fixture {
	t.Helper()
	f := &fixture{scrapes: &atomic.Int64{}, done: make(chan error, 1)}
	kubelet := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The node's annotation moved the path: it must survive the informer's trimming.
		if r.URL.Path != "/custom/resource" {
			http.NotFound(w, r)
			return
		}
		// A kubelet's node series: a fresh timestamp and a growing CPU counter at every scrape.
		n := f.scrapes.Add(1)
		ms := time.Now().UnixMilli()
		fmt.Fprintf(w, "# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total %g %d\n", 100+float64(n)/2, ms)
		fmt.Fprintf(w, "# TYPE node_memory_working_set_bytes gauge\nnode_memory_working_set_bytes 1.073741824e+09 %d\n", ms)
		// And two pods' containers: p1, reported whether or not it still exists, as a kubelet does for a while,
		// and p2, which is bound to another node.
		fmt.Fprintf(w, "# TYPE container_cpu_usage_seconds_total counter\n")
		for _, p := range []string{"p1", "p2"} {
			fmt.Fprintf(w, "container_cpu_usage_seconds_total{container=\"app\",namespace=\"ns\",pod=%q} %g %d\n", p, 10+float64(n)/4, ms)
		}
		fmt.Fprintf(w, "# TYPE container_memory_working_set_bytes gauge\n")
		for _, p := range []string{"p1", "p2"} {
			fmt.Fprintf(w, "container_memory_working_set_bytes{container=\"app\",namespace=\"ns\",pod=%q} 1.048576e+06 %d\n", p, ms)
		}
	}))
	t.Cleanup(kubelet.Close)
	port := kubelet.Listener.Addr().(*net.TCPAddr).Port

	running := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	f.kube = fake.NewClientset(running("p1", "node-1"), running("p2", "node-2"), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1",
			Annotations:   map[string]string{"metrics.k8s.io/resource-metrics-path": "/custom/resource", "other": "dropped"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Status: corev1.NodeStatus{
			Images:          []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 300000}},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
		},
	})

	if hook != nil {
		hook(f.kube)
	}
	o, _, err := parse(t, append([]string{"--kubelet-insecure-tls", "--kubelet-use-node-status-port", "--metric-resolution=1s",
		"--bind-address=127.0.0.1", "--cert-dir=" + t.TempDir()}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	o.Server.SecureServing.Listener = ln
	o.Server.Authentication.RemoteKubeConfigFileOptional = true
	o.Server.Authentication.SkipInClusterLookup = true
	o.Server.Authorization.RemoteKubeConfigFileOptional = true

	if f.w, err = Wire(o, f.kube, &rest.Config{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	go func() { f.done <- f.w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if ok, _ := f.wait(30 * time.Second); !ok { // a bound, not an assertion
			t.Error("did not stop")
		}
	})
	return f
}

// wait waits at most bound for Run to return and reports whether it returned, and its error.
func (f *fixture) wait(bound time.Duration) (bool, error) {
	if f.exited {
		return true, f.err
	}
	select {
	case f.err = <-f.done:
		f.exited = true
	case <-time.After(bound):
	}
	return f.exited, f.err
}

// waitReady polls /readyz?verbose until it passes (bounded) and returns its last answer.
func (f *fixture) waitReady(t *testing.T) string {
	t.Helper()
	var body string
	for i := 0; i < 300; i++ { // bounded: the first cycle needs one scrape of one loopback kubelet
		code, b, err := insecureGet("https://" + f.addr + "/readyz?verbose")
		body = b
		if err == nil && code == http.StatusOK {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return body
}

// insecureGet GETs url without credentials; only the status and body matter.
func insecureGet(url string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestWiring checks that /readyz turns ready once the first collection cycle has finished, with both named
// checks, that the node's metrics are then served, that a pod bound to another node is not served from this node's
// report, and that a deleted pod's metrics are dropped.
func TestWiring(t *testing.T) {
	f := startFixture(t)
	w, ctx := f.w, context.Background()
	body := f.waitReady(t)
	for _, want := range []string{"[+]informer-sync ok", "[+]metric-collection ok", "readyz check passed"} {
		if !strings.Contains(body, want) {
			t.Fatalf("/readyz never passed with %q:\n%s", want, body)
		}
	}
	if h := w.Storage.Latest().Health(); h.Cycles == 0 || h.Source != "kubelet" {
		t.Fatalf("storage health %+v", h)
	}

	// The second scrape (one resolution later) makes the node servable through the API.
	var p storage.NodePoint
	ok := false
	for i := 0; i < 100 && !ok; i++ { // bounded
		if p, ok = w.Storage.Latest().Node("node-1"); !ok {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !ok || p.Memory != 1<<30 {
		t.Fatalf("node-1 never servable (%v) or wrong memory %d after %d scrapes", ok, p.Memory, f.scrapes.Load())
	}
	if _, ok := w.Storage.Latest().Pod("ns", "p1"); !ok {
		t.Fatal("pod ns/p1 not servable when node-1 is")
	}
	if p, ok := w.Storage.Latest().Pod("ns", "p2"); ok {
		t.Fatalf("pod ns/p2, bound to node-2, served from node-1's report: %+v", p)
	}
	// Deleting the pod drops its series by the next cycle, though the kubelet goes on reporting it.
	if err := f.kube.CoreV1().Pods("ns").Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := false
	for i := 0; i < 100 && !deleted; i++ { // bounded: a cycle a second
		if _, ok := w.Storage.Latest().Pod("ns", "p1"); ok {
			time.Sleep(50 * time.Millisecond)
		} else {
			deleted = true
		}
	}
	if !deleted {
		t.Fatalf("deleted pod ns/p1 still served after %d scrapes", f.scrapes.Load())
	}
	if _, ok := w.Storage.Latest().Node("node-1"); !ok {
		t.Fatal("node-1 not served after its pod was deleted")
	}
	code, _, err := insecureGet("https://" + f.addr + "/apis/metrics.k8s.io/v1beta1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	// Anonymous (no front proxy, no SubjectAccessReview) is authenticated but not authorized.
	if code != http.StatusForbidden {
		t.Fatalf("anonymous list nodes: %d, want 403", code)
	}
}

// TestWarmUpWhilePodsAreListed: once the nodes are known, the kubelets are scraped once (their connections opened)
// while the pod informer's initial list is still under way, but nothing is published and /readyz keeps failing
// until the first cycle, which starts once the pods are known and serves a rate from the warm-up's sample to its own.
func TestWarmUpWhilePodsAreListed(t *testing.T) {
	// The pod list fails until released, as a slow one would not have answered: the informer retries. (A reactor
	// that blocked would hold the fake clientset's lock, and the node list with it.)
	var released atomic.Bool
	f := startFixtureWith(t, func(c *fake.Clientset) {
		c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			if !released.Load() {
				return true, nil, errors.New("the pod list is still under way")
			}
			return false, nil, nil
		})
		// A resolution of 2 s: the warm-up is over half a resolution old when the pods are known, 1.5 s later; and a
		// --stale-after that outlasts the informer's retries (up to seconds apart), so its sample pairs with the
		// first cycle's.
	}, "--metric-resolution=2s", "--stale-after=30s")
	for i := 0; i < 200 && f.scrapes.Load() == 0; i++ { // bounded: one scrape of one loopback kubelet
		time.Sleep(25 * time.Millisecond)
	}
	if f.scrapes.Load() == 0 {
		t.Fatal("no kubelet scraped while the pods were being listed: the first cycle would open every connection")
	}
	time.Sleep(1500 * time.Millisecond) // a cycle that did not wait for the pods would have started at once
	if h := f.w.Storage.Latest().Health(); h.Cycles != 0 {
		t.Fatalf("%d cycles committed before the pod informer synced", h.Cycles)
	}
	if n := f.scrapes.Load(); n != 1 {
		t.Errorf("%d scrapes before the pods were known, want the one warm-up", n)
	}
	if code, _, err := insecureGet("https://" + f.addr + "/readyz"); err != nil || code == http.StatusOK {
		t.Fatalf("/readyz %d (%v) before the first cycle", code, err)
	}
	released.Store(true)
	// The warm-up's response (over half a resolution old by now) counts: the first cycle's commit serves node-1
	// and its pod with a rate over both samples, and still nothing of p2, bound to node-2.
	var first storage.Snapshot
	for i := 0; i < 3000 && (first == nil || first.Health().Cycles == 0); i++ { // bounded: 30 s, the informer's retries
		time.Sleep(10 * time.Millisecond)
		first = f.w.Storage.Latest()
	}
	if h := first.Health(); h.Cycles != 1 {
		t.Fatalf("health %+v once the pods were listed: want the first cycle's commit", h)
	}
	if n, ok := first.Node("node-1"); !ok || n.Window < time.Second {
		t.Errorf("the first cycle serves node-1 as %+v (%v): want a rate since the warm-up's sample", n, ok)
	}
	if _, ok := first.Pod("ns", "p1"); !ok {
		t.Error("the first cycle does not serve ns/p1, whose two samples it had")
	}
	if p, ok := first.Pod("ns", "p2"); ok {
		t.Errorf("ns/p2, bound to node-2, served from node-1's warm-up: %+v", p)
	}
	body := f.waitReady(t)
	if !strings.Contains(body, "readyz check passed") {
		t.Fatalf("/readyz never passed once the pods were listed:\n%s", body)
	}
}
