package app

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/metrics-ring/metrics-ring/internal/testpki"
)

// urlPassword is the password an operator put in --prometheus-url.
const urlPassword = "pa55-in-the-url"

// lines collects text for a test: klog's lines, a watch's stream.
type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPasswordInPrometheusURLAppearsNowhere runs the process with a password in --prometheus-url against a
// Prometheus that serves, then fails (a proxy's 502, then connection refused), and looks for the password in
// everything a reader or an operator gets: the 503 client-go gets for list and get, a watch's stream up to the
// ERROR event that ends it, every log line at -v=10, and /metrics.
func TestPasswordInPrometheusURLAppearsNowhere(t *testing.T) {
	var logs lines
	testLogs.capture(&logs)
	t.Cleanup(func() { testLogs.capture(nil) })
	var failing, authorized atomic.Bool
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); ok && user == "metrics-ring" && pass == urlPassword {
			authorized.Store(true)
		}
		if failing.Load() {
			http.Error(w, "<html>502 Bad Gateway</html>", http.StatusBadGateway)
			return
		}
		// One series naming node-1 and ns/p1's container answers every query, node and container alike.
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"node":"node-1",`+
			`"namespace":"ns","pod":"p1","container":"app"},"value":[%s,"1048576"]}]}}`, r.FormValue("time"))
	}))
	defer prom.Close()
	scheme, rest_, _ := strings.Cut(prom.URL, "://")
	caFile, admin := adminCert(t)
	f := startFixture(t, "--source=prometheus", "--prometheus-url="+scheme+"://metrics-ring:"+urlPassword+"@"+rest_,
		"--client-ca-file="+caFile)
	if body := f.waitReady(t); !strings.Contains(body, "readyz check passed") {
		t.Fatalf("never ready:\n%s", body)
	}
	cfg := &rest.Config{Host: "https://" + f.addr, TLSClientConfig: admin}
	client := metricsclient.NewForConfigOrDie(cfg).MetricsV1beta1()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	until(t, "ns/p1 to be served", func() error {
		_, err := client.PodMetricses("ns").Get(ctx, "p1", metav1.GetOptions{})
		return err
	})

	// A watch started while the data is served; its raw stream, up to the ERROR event that ends it.
	var stream lines
	body, err := client.RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/pods").Param("watch", "true").Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	go func() {
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			fmt.Fprintln(&stream, sc.Text())
		}
	}()

	var texts []string
	failing.Store(true)
	for _, phase := range []struct {
		cause string
		start func()
	}{{"HTTP 502", func() {}}, {"connection refused", prom.Close}} {
		phase.start()
		until(t, "list and get to answer 503 naming "+phase.cause, func() error {
			_, errList := client.PodMetricses("").List(ctx, metav1.ListOptions{})
			_, errGet := client.NodeMetricses().Get(ctx, "node-1", metav1.GetOptions{})
			for _, err := range []error{errList, errGet} {
				if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), phase.cause) {
					return fmt.Errorf("%v, want a 503 naming %q", err, phase.cause)
				}
				texts = append(texts, err.Error())
			}
			return nil
		})
	}
	until(t, "the watch to end with an ERROR event", func() error {
		if !strings.Contains(stream.String(), `"type":"ERROR"`) {
			return fmt.Errorf("stream so far:\n%s", stream.String())
		}
		return nil
	})
	raw, err := client.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	metrics := string(raw)
	if err != nil || !strings.Contains(metrics, "metrics_ring_prometheus_queries_total") {
		t.Fatalf("/metrics: %v\n%s", err, metrics)
	}
	if !authorized.Load() {
		t.Error("Prometheus never got the URL's credentials as basic auth")
	}
	texts = append(texts, stream.String(), logs.String(), metrics)
	for _, text := range texts {
		if strings.Contains(text, urlPassword) {
			t.Errorf("the password is in:\n%s", text)
		}
	}
}

// until retries check every 50 ms until it passes, failing the test after 30 s (a bound, not a timing).
func until(t *testing.T, what string, check func() error) {
	t.Helper()
	var err error
	for i := 0; i < 600; i++ {
		if err = check(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("waiting for %s: %v", what, err)
}

// adminCert writes a client CA for --client-ca-file and returns it with a client certificate it signed for a user in
// system:masters, whom the server's delegated authorization always allows.
func adminCert(t *testing.T) (string, rest.TLSClientConfig) {
	t.Helper()
	ca := testpki.NewCA(t, "test-client-ca")
	admin := ca.Client(t, "admin", "system:masters")
	return ca.WriteCert(t, t.TempDir(), "client-ca.crt"),
		rest.TLSClientConfig{Insecure: true, CertData: admin.CertPEM, KeyData: admin.KeyPEM}
}
