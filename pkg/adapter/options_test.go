package adapter

import (
	"strings"
	"testing"
	"time"
)

func TestClientOptionsValidate(t *testing.T) {
	good := func() ClientOptions { o := DefaultClientOptions(); o.URL = "http://127.0.0.1:9090"; return o }
	for _, tc := range []struct {
		name   string
		change func(*ClientOptions)
		want   string // "" for valid
	}{
		{"defaults with a URL", func(*ClientOptions) {}, ""},
		{"POST, any case", func(o *ClientOptions) { o.Method = "post" }, ""},
		{"empty method is GET", func(o *ClientOptions) { o.Method = "" }, ""},
		{"no URL", func(o *ClientOptions) { o.URL = "" }, "--source=prometheus needs --prometheus-url"},
		{"relative URL", func(o *ClientOptions) { o.URL = "prometheus:9090" }, `--prometheus-url "prometheus:9090": want an absolute`},
		{"verb", func(o *ClientOptions) { o.Method = "DELETE" }, `--prometheus-verb "DELETE": want GET or POST`},
		{"cert without key", func(o *ClientOptions) { o.CertFile = "c" }, "go together"},
		{"zero timeout", func(o *ClientOptions) { o.Timeout = 0 }, "--prometheus-query-timeout=0s must be positive"},
		{"zero cap", func(o *ClientOptions) { o.MaxResponseBytes = 0 }, "--prometheus-max-response-bytes=0 must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			tc.change(&o)
			errs := o.Validate()
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Fatalf("want valid, got %v", errs)
			case tc.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want)):
				t.Fatalf("want one error containing %q, got %v", tc.want, errs)
			}
		})
	}
}

// newClient fills zero values from DefaultClientOptions before validating, so a library caller needs only a URL.
func TestNewClientDefaults(t *testing.T) {
	c, err := newClient(ClientOptions{URL: "http://127.0.0.1:9090"})
	if err != nil {
		t.Fatal(err)
	}
	if c.method != "GET" || c.timeout != 10*time.Second || c.maxBytes != defaultMaxResponseBytes {
		t.Errorf("method %q timeout %v max bytes %d: want the defaults", c.method, c.timeout, c.maxBytes)
	}
}
