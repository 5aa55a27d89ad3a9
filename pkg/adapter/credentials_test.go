package adapter

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// password is what an operator put in --prometheus-url; no text a reader or the log gets may carry it.
const password = "pa55-in-the-url"

// withPassword puts user information into a server's URL, as `https://user:pass@host` in --prometheus-url.
func withPassword(u string) string {
	scheme, rest, _ := strings.Cut(u, "://")
	return scheme + "://metrics-ring:" + password + "@" + rest
}

// TestPasswordInURLAppearsNowhere polls a failing Prometheus whose URL carries a password, until storage answers
// the 503 every namespace reader gets, and looks for the password in the poll's error, the 503 text (which the
// ERROR event ending watches carries too), every log line at any verbosity, and /metrics.
func TestPasswordInURLAppearsNowhere(t *testing.T) {
	answer := func(status int, body string) func(t *testing.T) string {
		return func(t *testing.T) string {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if user, pass, ok := r.BasicAuth(); !ok || user != "metrics-ring" || pass != password {
					t.Errorf("request without the URL's credentials as basic auth: %q %q %v", user, pass, ok)
				}
				if status == http.StatusTemporaryRedirect {
					w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
				}
				w.WriteHeader(status)
				fmt.Fprint(w, body)
			}))
			t.Cleanup(s.Close)
			return s.URL
		}
	}
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) string
		cause  string // what the 503 must still say
	}{
		{"connection refused", func(t *testing.T) string {
			s := httptest.NewServer(http.NotFoundHandler())
			s.Close()
			return s.URL
		}, "connection refused"},
		{"HTTP 500 from a proxy", answer(500, "<html>Internal Server Error</html>"), "HTTP 500: not a valid Prometheus API response"},
		{"HTTP 500 from Prometheus", answer(500, `{"status":"error","errorType":"internal","error":"boom"}`), "Prometheus answered HTTP 500"},
		{"a redirect", answer(http.StatusTemporaryRedirect, ""), "307"},
		{"a certificate not trusted", func(t *testing.T) string {
			s := httptest.NewTLSServer(http.NotFoundHandler())
			s.Config.ErrorLog = nil
			t.Cleanup(s.Close)
			return s.URL
		}, "x509"},
		{"a timeout", func(t *testing.T) string {
			s := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
			t.Cleanup(s.Close)
			return s.URL
		}, "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&logs), textlogger.Verbosity(10))))
			t.Cleanup(klog.ClearLogger)
			// Room for a loaded machine's TLS handshake before its x509 error, unless the timeout is the failure.
			timeout := 10 * time.Second
			if tc.cause == "timed out" {
				timeout = 200 * time.Millisecond
			}
			now := time.Now()
			store := storage.New(storage.Options{Source: "prometheus", Resolution: 15 * time.Second,
				Now: func() time.Time { return now }})
			a, err := New(Options{ClientOptions: ClientOptions{URL: withPassword(tc.server(t)), Timeout: timeout},
				Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			for range 4 {
				now = now.Add(15 * time.Second)
				c := store.BeginCycle()
				o := a.Collect(context.Background(), c.Append)
				c.Commit(o)
				if o.Err == nil {
					t.Fatal("a failing Prometheus polled without an error")
				}
				texts = append(texts, o.Err.Error())
			}
			unavailable := store.Latest().Unavailable()
			if unavailable == nil || !strings.Contains(unavailable.Error(), tc.cause) {
				t.Fatalf("503 text %v: want the cause %q", unavailable, tc.cause)
			}
			texts = append(texts, unavailable.Error(), logs.String(), gathered(t))
			for _, text := range texts {
				if strings.Contains(text, password) {
					t.Errorf("the password is in:\n%s", text)
				}
			}
		})
	}
}

// gathered is the text of every metric in the registry /metrics serves.
func gathered(t *testing.T) string {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		fmt.Fprintln(&b, f.String())
	}
	return b.String()
}

// A URL that does not parse is refused at start-up without quoting its password.
func TestInvalidURLIsNotQuotedWithItsPassword(t *testing.T) {
	for _, raw := range []string{"http://u:" + password + "@prometheus:90 90", "u:" + password + "@prometheus:9090",
		"http://u:" + password + "@/api"} {
		o := DefaultClientOptions()
		o.URL = raw
		errs := o.Validate()
		if len(errs) != 1 || strings.Contains(errs[0].Error(), password) || !strings.Contains(errs[0].Error(), "--prometheus-url") {
			t.Errorf("Validate(%q) = %v: want one error naming --prometheus-url, without the password", raw, errs)
		}
	}
}

// Basic auth from a file, as prometheus-adapter users expect: the file is read at every request, so a rotated
// password is used from the next poll on.
func TestBasicAuthFromFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{ClientOptions: ClientOptions{BasicAuthUsername: "adapter", BasicAuthPasswordFile: file}})
	h.poll(0)
	if err := os.WriteFile(file, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.poll(15 * time.Second)
	h.prom.mu.Lock()
	defer h.prom.mu.Unlock()
	for i, want := range map[int]string{0: "first", len(h.prom.requests) - 1: "second"} {
		if user, pass, ok := h.prom.requests[i].BasicAuth(); !ok || user != "adapter" || pass != want {
			t.Errorf("request %d: basic auth %q %q %v, want adapter %q", i, user, pass, ok, want)
		}
	}
	if _, ok := h.store.Latest().Pod("ns", "p"); !ok {
		t.Error("nothing served through basic auth")
	}
}
