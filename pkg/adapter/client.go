package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	pconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
)

// ClientOptions say how to reach the Prometheus HTTP API.
type ClientOptions struct {
	// URL is the base URL, e.g. http://prometheus.monitoring.svc:9090 (or a Thanos/Mimir prefix).
	URL string
	// BearerTokenFile is read on every request, so a rotated service-account token is picked up.
	BearerTokenFile string
	// BasicAuthUsername and BasicAuthPasswordFile send basic auth; the file is read on every request, so a rotated
	// password is picked up. A URL's user information is sent the same way, and never quoted (credentials.go).
	BasicAuthUsername, BasicAuthPasswordFile string
	// CAFile verifies the server; CertFile and KeyFile are a client certificate.
	CAFile, CertFile, KeyFile string
	InsecureSkipVerify        bool
	// Headers are sent with every request (e.g. X-Scope-OrgID for Mimir).
	Headers map[string]string
	// Method is GET or POST (default GET). POST keeps long queries out of URLs and access logs.
	Method string
	// Timeout bounds each query (default 10s), and is sent as Prometheus' own timeout parameter so it stops
	// evaluating too.
	Timeout time.Duration
	// MaxResponseBytes caps each query's response (default 64 MiB); a larger one is an error.
	MaxResponseBytes int64
}

// client runs instant queries against the Prometheus HTTP API.
type client struct {
	endpoint string
	http     *http.Client
	method   string
	timeout  time.Duration
	maxBytes int64
}

// Defaults of the Prometheus client's flags; DefaultClientOptions gathers them.
const (
	defaultMethod  = http.MethodGet
	defaultTimeout = 10 * time.Second
)

// DefaultClientOptions are the defaults of every setting that has one; newClient fills zero values from it.
func DefaultClientOptions() ClientOptions {
	return ClientOptions{Method: defaultMethod, Timeout: defaultTimeout, MaxResponseBytes: defaultMaxResponseBytes}
}

// Validate reports every reason o cannot configure the client. It is the one place these settings are checked: cmd
// checks its flags by validating the ClientOptions they make, so the messages name the flags. Zero values are
// checked as they are (newClient fills in the defaults first), except an empty Method, which is GET.
func (o ClientOptions) Validate() []error {
	var errs []error
	if o.URL == "" {
		errs = append(errs, errors.New("--source=prometheus needs --prometheus-url"))
	} else if u, err := url.Parse(o.URL); err != nil || u.Scheme == "" || u.Host == "" {
		// Neither o.URL nor url.Parse's error, which quotes it: either may hold a password.
		errs = append(errs, fmt.Errorf("--prometheus-url %q: want an absolute http(s) URL", redact(o.URL)))
	} else if u.User != nil && (o.BasicAuthUsername != "" || o.BasicAuthPasswordFile != "" || o.BearerTokenFile != "") {
		errs = append(errs, errors.New("--prometheus-url carries credentials, and --prometheus-basic-auth-* or "+
			"--prometheus-token-file give others: use one"))
	}
	if o.BasicAuthUsername != "" && o.BearerTokenFile != "" {
		errs = append(errs, errors.New("--prometheus-basic-auth-username and --prometheus-token-file: use one"))
	}
	if (o.BasicAuthUsername == "") != (o.BasicAuthPasswordFile == "") {
		errs = append(errs, errors.New("--prometheus-basic-auth-username and --prometheus-basic-auth-password-file go together"))
	}
	if m := strings.ToUpper(o.Method); m != "" && m != http.MethodGet && m != http.MethodPost {
		errs = append(errs, fmt.Errorf("--prometheus-verb %q: want GET or POST", o.Method))
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(errs, errors.New("--prometheus-client-tls-cert-file and --prometheus-client-tls-key-file go together"))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--prometheus-query-timeout=%v must be positive", o.Timeout))
	}
	if o.MaxResponseBytes <= 0 {
		errs = append(errs, fmt.Errorf("--prometheus-max-response-bytes=%d must be positive", o.MaxResponseBytes))
	}
	return errs
}

func newClient(o ClientOptions) (*client, error) {
	d := DefaultClientOptions()
	if o.Method == "" {
		o.Method = d.Method
	}
	if o.Timeout == 0 {
		o.Timeout = d.Timeout
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = d.MaxResponseBytes
	}
	if err := errors.Join(o.Validate()...); err != nil {
		return nil, err
	}
	u, _ := url.Parse(o.URL) // checked by Validate
	u, basic := splitCredentials(u)
	method := strings.ToUpper(o.Method)
	cfg := pconfig.HTTPClientConfig{
		TLSConfig: pconfig.TLSConfig{CAFile: o.CAFile, CertFile: o.CertFile, KeyFile: o.KeyFile,
			InsecureSkipVerify: o.InsecureSkipVerify},
		// A redirect would carry the bearer token and headers to wherever Prometheus' answer points: the same rule
		// as for kubelets (DESIGN.md section 4). A 3xx is an error naming the status.
		FollowRedirects: false,
		EnableHTTP2:     true,
	}
	if o.BasicAuthUsername != "" {
		basic = &pconfig.BasicAuth{Username: o.BasicAuthUsername, PasswordFile: o.BasicAuthPasswordFile}
	}
	cfg.BasicAuth = basic
	if o.BearerTokenFile != "" {
		cfg.Authorization = &pconfig.Authorization{Type: "Bearer", CredentialsFile: o.BearerTokenFile}
	}
	if len(o.Headers) > 0 {
		cfg.HTTPHeaders = &pconfig.Headers{Headers: map[string]pconfig.Header{}}
		for k, v := range o.Headers {
			cfg.HTTPHeaders.Headers[k] = pconfig.Header{Values: []string{v}}
		}
	}
	if err := cfg.Validate(); err != nil {
		//lint:ignore ST1005 Prometheus is a proper noun
		return nil, fmt.Errorf("Prometheus client config: %w", err)
	}
	hc, err := pconfig.NewClientFromConfig(cfg, "metrics-ring")
	if err != nil {
		//lint:ignore ST1005 Prometheus is a proper noun
		return nil, fmt.Errorf("Prometheus client: %w", err)
	}
	return &client{endpoint: strings.TrimSuffix(u.String(), "/") + "/api/v1/query", http: hc, method: method,
		timeout: o.Timeout, maxBytes: o.MaxResponseBytes}, nil
}

// deadline bounds one query: the timeout, and a moment left to Prometheus to answer its own timeout with a clear
// error.
func (c *client) deadline() time.Duration { return c.timeout + c.timeout/10 + 100*time.Millisecond }

// errTimeout marks a query that ran out of time, so it is counted apart from other failures.
var errTimeout = errors.New("timed out")

// query runs one instant query at ts. Warnings (from Prometheus, or a Thanos partial response) come back with the
// result; they are not errors.
func (c *client) query(ctx context.Context, promql string, ts time.Time) (model.Vector, []string, error) {
	form := url.Values{
		"query":   {promql},
		"time":    {strconv.FormatFloat(float64(ts.UnixMilli())/1e3, 'f', 3, 64)},
		"timeout": {model.Duration(c.timeout).String()},
	}
	ctx, cancel := context.WithTimeout(ctx, c.deadline())
	defer cancel()
	var req *http.Request
	var err error
	if c.method == http.MethodPost {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, strings.NewReader(form.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint+"?"+form.Encode(), nil)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("building request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("%s %s: %w after %s: %w", c.method, c.endpoint, errTimeout, c.timeout, err)
		}
		return nil, nil, fmt.Errorf("%s %s: %w", c.method, c.endpoint, err)
	}
	defer resp.Body.Close()
	body := newCapped(resp.Body, c.maxBytes)
	vec, warnings, err := decode(body, resp.StatusCode)
	switch {
	case body.err == nil && errors.Is(err, errMalformed):
		// What the response was instead starts the log line.
		return nil, warnings, logonly.Wrap(fmt.Errorf("%s %s: %w", c.method, c.endpoint, err),
			append(logonly.KV(err), "responseStart", string(body.head))...)
	case errors.Is(body.err, context.DeadlineExceeded):
		return nil, nil, fmt.Errorf("reading response of %s: %w after %s: %w", c.endpoint, errTimeout, c.timeout, body.err)
	case body.err != nil:
		// Reading failed: the cap, or the connection. Whatever decoding made of the bytes before is moot.
		return nil, nil, fmt.Errorf("reading response of %s: %w", c.endpoint, body.err)
	}
	return vec, warnings, err
}
