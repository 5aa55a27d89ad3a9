package api

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/metrics-ring/metrics-ring/pkg/collect"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// testServer is the real server on 127.0.0.1 behind front-proxy authentication, reading a real storage fed with
// known samples, with node and pod informers over fake clients.
type testServer struct {
	url     string
	pki     frontProxyPKI
	store   *storage.Storage
	clock   *testClock
	timers  *heldTimers
	meta    *metadatafake.FakeMetadataClient // the pods' API: deleting one tells storage, as cmd wires it
	certDir string
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// heldTimers is the test server's storage.Options.AfterFunc: time.AfterFunc, unless a test holds the timers to fire
// them when it says.
type heldTimers struct {
	mu   sync.Mutex
	held bool
	due  []func()
}

func (h *heldTimers) afterFunc(d time.Duration, f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.due = append(h.due, f)
		return
	}
	time.AfterFunc(d, f)
}

// hold keeps the timers set from now on until fire.
func (h *heldTimers) hold() {
	h.mu.Lock()
	h.held = true
	h.mu.Unlock()
}

// fire runs the timers held, and lets later ones run on their own.
func (h *heldTimers) fire() {
	h.mu.Lock()
	due := h.due
	h.due, h.held = nil, false
	h.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// maxTestWatches is the test server's --max-watches.
const maxTestWatches = 3

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// feed stores two kubelet scrapes of node-a 15s apart: node CPU 0.25 cores, 3Gi; pod ns-a/web-1 containers app
// (0.1 cores, 20Mi) and sidecar (0.05 cores, 5Mi); pod ns-b/db-1 app (1.5 cores, 1Gi).
func feed(s *storage.Storage) {
	s.PodBound("ns-a", "web-1", "node-a") // as the pod informer tells storage
	s.PodBound("ns-b", "db-1", "node-a")
	start := t0.Add(-time.Hour)
	for i, ts := range []time.Time{t0, t0.Add(15 * time.Second)} {
		f := float64(i * 15)
		cy := s.BeginCycle()
		cy.Append(&storage.Batch{Key: "node-a", CPU: storage.CPUCumulative,
			Nodes: []storage.NodeSample{{Node: "node-a", Sample: storage.Sample{Timestamp: ts, StartTime: start, CPU: 1000 + 0.25*f, Memory: 3 << 30}}},
			Containers: []storage.ContainerSample{
				{Namespace: "ns-a", Pod: "web-1", Container: "app", Sample: storage.Sample{Timestamp: ts, StartTime: start, CPU: 10 + 0.1*f, Memory: 20 << 20}},
				{Namespace: "ns-a", Pod: "web-1", Container: "sidecar", Sample: storage.Sample{Timestamp: ts, StartTime: start, CPU: 5 + 0.05*f, Memory: 5 << 20}},
				{Namespace: "ns-b", Pod: "db-1", Container: "app", Sample: storage.Sample{Timestamp: ts, StartTime: start, CPU: 50 + 1.5*f, Memory: 1 << 30}},
			}})
		cy.Commit(storage.Outcome{Success: true})
	}
}

func startTestServer(t *testing.T) *testServer {
	t.Helper()
	ts := newTestServer(t, nil, t0.Add(16*time.Second))

	kube := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"role": "worker"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}, // never scraped: left out
	)
	metaScheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(metaScheme); err != nil {
		t.Fatal(err)
	}
	ts.meta = metadatafake.NewSimpleMetadataClient(metaScheme,
		podMeta("ns-a", "web-1", map[string]string{"app": "web"}),
		podMeta("ns-b", "db-1", map[string]string{"app": "db"}),
		podMeta("ns-b", "pending-1", map[string]string{"app": "db"}), // no metrics: left out
	)
	factory := informers.NewSharedInformerFactory(kube, 0)
	nodes := factory.Core().V1().Nodes()
	pods := metadatainformer.NewSharedInformerFactory(ts.meta, 0).ForResource(corev1.SchemeGroupVersion.WithResource("pods"))
	nodeInf, podInf := nodes.Informer(), pods.Informer()

	ts.store = storage.New(storage.Options{Source: "kubelet", Resolution: 15 * time.Second, Now: ts.clock.Now,
		AfterFunc: ts.timers.afterFunc})
	feed(ts.store)
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			ts.store.PodDeleted(m.GetNamespace(), m.GetName())
		}
	}}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go nodeInf.Run(ctx.Done())
	go podInf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodeInf.HasSynced, podInf.HasSynced) {
		t.Fatal("informers did not sync")
	}
	ts.serve(t, Deps{Snapshots: ts.store, Nodes: nodes.Lister(), Pods: pods.Lister(),
		InformersSynced: func() bool { return nodeInf.HasSynced() && podInf.HasSynced() },
		MaxWatches:      maxTestWatches,
	}, nil)
	return ts
}

// loopbackOptions is NewServerOptions for a test: listening on a port of its own on 127.0.0.1 (closed at the
// test's end), its serving certificate generated into dir, no cluster to look up for authentication, and the
// max-in-flight limits rather than priority and fairness (no flowcontrol API to read).
func loopbackOptions(t *testing.T, dir string) *ServerOptions {
	t.Helper()
	o := NewServerOptions()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	o.SecureServing.Listener = ln
	o.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	o.SecureServing.ServerCert.CertDirectory = dir
	o.Authentication.RemoteKubeConfigFileOptional = true
	o.Authentication.SkipInClusterLookup = true
	o.Features.EnablePriorityAndFairness = false
	return o
}

// newTestServer is a test server reading store, whose clock is now; serve runs it.
func newTestServer(t *testing.T, store *storage.Storage, now time.Time) *testServer {
	dir := t.TempDir()
	return &testServer{pki: newFrontProxyPKI(t, dir), clock: &testClock{now: now}, timers: &heldTimers{}, certDir: dir,
		store: store}
}

// serve runs the real server with d (its Collection a loop that never runs, judging the cycles ts.store commits)
// and its configuration changed by tweak when not nil, and returns once it answers; the test's end stops it.
func (ts *testServer) serve(t *testing.T, d Deps, tweak func(*genericapiserver.Config)) {
	t.Helper()
	o := loopbackOptions(t, ts.certDir)
	// No cluster to ask: the request-header CA comes from flags, as --requestheader-client-ca-file would give it.
	o.Authentication.RequestHeader.ClientCAFile = ts.pki.caFile
	o.Authentication.RequestHeader.AllowedNames = []string{ts.pki.allowedClientName}
	o.Authorization.RemoteKubeConfigFileOptional = true // no SubjectAccessReview: only system:masters is allowed
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	cfg, err := o.Config("test")
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(cfg)
	}
	// The health checks ask a real loop, judging the cycles the tests commit; it never runs.
	if d.Collection, err = collect.New(idleSource{}, ts.store, collect.Options{Source: "kubelet",
		Resolution: 15 * time.Second, Now: ts.clock.Now}); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.PrepareRun().RunWithContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server: %v", err)
			}
		case <-time.After(30 * time.Second): // a bound, not an assertion
			t.Error("server did not stop")
		}
	})
	ts.url = "https://" + o.SecureServing.Listener.Addr().String()
	// Wait (bounded) until the server answers.
	c := ts.httpClient(t, "", nil)
	for i := 0; ; i++ {
		resp, err := c.Get(ts.url + "/livez")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i == 200 {
			t.Fatalf("server never answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restConfig is how the aggregator reaches us: front-proxy client certificate plus the user in headers. An empty
// user sends no identity headers.
func (ts *testServer) restConfig(user string, groups []string) *rest.Config {
	cfg := &rest.Config{
		Host: ts.url,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   filepath.Join(ts.certDir, "apiserver.crt"),
			CertData: ts.pki.clientCertPEM,
			KeyData:  ts.pki.clientKeyPEM,
		},
	}
	if user != "" {
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				r.Header.Set("X-Remote-User", user)
				for _, g := range groups {
					r.Header.Add("X-Remote-Group", g)
				}
				return rt.RoundTrip(r)
			})
		}
	}
	return cfg
}

func (ts *testServer) httpClient(t *testing.T, user string, groups []string) *http.Client {
	t.Helper()
	c, err := rest.HTTPClientFor(ts.restConfig(user, groups))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (ts *testServer) metricsClient(t *testing.T, protobuf bool) *metricsclient.Clientset {
	t.Helper()
	cfg := ts.restConfig("alice", []string{"system:masters", "system:authenticated"})
	if protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf"
	}
	c, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// idleSource is the source of a loop that never runs: its budget bounds the liveness check.
type idleSource struct{}

func (idleSource) Budget() time.Duration { return 10 * time.Second }

func (idleSource) Collect(context.Context, storage.AppendFunc) storage.Outcome {
	return storage.Outcome{}
}
