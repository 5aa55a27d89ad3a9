package app

import (
	"bytes"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/metrics-ring/metrics-ring/pkg/version"
)

// parse runs the real command line (flag parsing, Complete, Validate) without starting anything.
func parse(t *testing.T, args ...string) (*Options, string, error) {
	t.Helper()
	o := NewOptions()
	var ran bool
	cmd := newCommand(o, func(*Options) error { ran = true; return nil })
	out := &bytes.Buffer{}
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	if err == nil && !ran && !o.ShowVersion {
		t.Fatal("command neither ran nor failed")
	}
	return o, out.String(), err
}

// The args of metrics-server v0.9.0's own manifests (manifests/base/deployment.yaml and the high-availability
// and test overlays), plus what operators commonly add: all must configure metrics-ring the same way.
func TestMetricsServerDeploymentArgs(t *testing.T) {
	o, _, err := parse(t,
		"--cert-dir=/tmp",
		"--secure-port=10250",
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--kubelet-use-node-status-port",
		"--metric-resolution=15s",
		"--kubelet-insecure-tls",
		"--kubelet-port=10255",
		"--kubelet-request-timeout=5s",
		"--node-selector=kubernetes.io/os=linux",
		"--bind-address=127.0.0.1",
		"--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
		"--tls-min-version=VersionTLS12",
		"--authentication-kubeconfig=/etc/kubernetes/authn.conf",
		"--authorization-kubeconfig=/etc/kubernetes/authz.conf",
		"--kubeconfig=/etc/kubernetes/kubeconfig",
		"--requestheader-client-ca-file=/etc/kubernetes/front-proxy-ca.crt",
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--authorization-always-allow-paths=/livez,/readyz,/metrics",
		"--show-hidden-metrics-for-version=", // accepted; a version is only valid for a binary with a Kubernetes version
		"--profiling=false",
		"--audit-log-path=-",
		"--audit-log-maxage=0",
		"-v=2",
		"--vmodule=scraper=4",
	)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"cert-dir", o.Server.SecureServing.ServerCert.CertDirectory, "/tmp"},
		{"secure-port", o.Server.SecureServing.BindPort, 10250},
		{"bind-address", o.Server.SecureServing.BindAddress.String(), net.ParseIP("127.0.0.1").String()},
		{"tls-min-version", o.Server.SecureServing.MinTLSVersion, "VersionTLS12"},
		{"tls-cipher-suites", o.Server.SecureServing.CipherSuites, []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}},
		{"address types", o.Kubelet.PreferredAddressTypes, []string{"InternalIP", "ExternalIP", "Hostname"}},
		{"node status port", o.Kubelet.UseNodeStatusPort, true},
		{"resolution", o.MetricResolution, 15 * time.Second},
		{"insecure tls", o.Kubelet.InsecureTLS, true},
		{"kubelet port", o.Kubelet.Port, 10255},
		{"request timeout", o.Kubelet.RequestTimeout, 5 * time.Second},
		{"kubelet compression, on by default", o.Kubelet.Compression, true},
		{"kubelet connection max age, 10m by default", o.Kubelet.ConnMaxAge, 10 * time.Minute},
		{"node selector", o.Kubelet.NodeSelector, "kubernetes.io/os=linux"},
		{"authn kubeconfig", o.Server.Authentication.RemoteKubeConfigFile, "/etc/kubernetes/authn.conf"},
		{"authz kubeconfig", o.Server.Authorization.RemoteKubeConfigFile, "/etc/kubernetes/authz.conf"},
		{"kubeconfig", o.Kubeconfig, "/etc/kubernetes/kubeconfig"},
		{"requestheader ca", o.Server.Authentication.RequestHeader.ClientCAFile, "/etc/kubernetes/front-proxy-ca.crt"},
		{"requestheader names", o.Server.Authentication.RequestHeader.AllowedNames, []string{"front-proxy-client"}},
		{"requestheader user", o.Server.Authentication.RequestHeader.UsernameHeaders, []string{"X-Remote-User"}},
		{"always allow paths", o.Server.Authorization.AlwaysAllowPaths, []string{"/livez", "/readyz", "/metrics"}},
		{"profiling", o.Server.Features.EnableProfiling, false},
		{"audit log", o.Server.Audit.LogOptions.Path, "-"},
		{"verbosity", int(o.Logging.Verbosity), 2},
		// ours, defaulted from the resolution
		{"source", o.Source, "kubelet"},
		{"history", o.History, 16},
		{"window", o.Window, 15 * time.Second},
		{"stale-after", o.StaleAfter, 45 * time.Second},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	so, err := o.Kubelet.ScraperOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if so.Port != 10255 || !so.UseNodeStatusPort || !so.InsecureTLS || so.Scheme != "https" || so.Timeout != 5*time.Second ||
		so.NodeSelector.String() != "kubernetes.io/os=linux" || len(so.PreferredAddressTypes) != 3 {
		t.Errorf("scraper options %+v", so)
	}
}

func TestDefaults(t *testing.T) {
	o, _, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if o.MetricResolution != 15*time.Second || o.Window != 15*time.Second || o.StaleAfter != 45*time.Second ||
		o.History != 16 || o.Source != "kubelet" || o.Kubelet.Port != 10250 || o.Kubelet.RequestTimeout != 10*time.Second ||
		strings.Join(o.Kubelet.PreferredAddressTypes, ",") != "InternalIP,ExternalIP,Hostname" ||
		o.Server.SecureServing.BindPort != 443 || o.MaxWatches != 1000 || o.MaxWatchesPerUser != 100 {
		t.Errorf("defaults: %+v %+v", o, o.Kubelet)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o *Options)
	}{
		{name: "one-second resolution gets a fitting timeout", args: []string{"--metric-resolution=1s"},
			check: func(t *testing.T, o *Options) {
				if o.Kubelet.RequestTimeout != 900*time.Millisecond || o.Window != time.Second || o.StaleAfter != 3*time.Second {
					t.Errorf("timeout %v window %v stale %v", o.Kubelet.RequestTimeout, o.Window, o.StaleAfter)
				}
			}},
		{name: "explicit timeout above the resolution", args: []string{"--metric-resolution=5s", "--kubelet-request-timeout=10s"},
			wantErr: "metric-resolution should be larger than kubelet-request-timeout"},
		{name: "ours", args: []string{"--history=32", "--window=30s", "--stale-after=2m"},
			check: func(t *testing.T, o *Options) {
				if o.History != 32 || o.Window != 30*time.Second || o.StaleAfter != 2*time.Minute {
					t.Errorf("history %d window %v stale %v", o.History, o.Window, o.StaleAfter)
				}
			}},
		{name: "watch limits", args: []string{"--max-watches=50", "--max-watches-per-user=0"},
			check: func(t *testing.T, o *Options) {
				if o.MaxWatches != 50 || o.MaxWatchesPerUser != 0 {
					t.Errorf("max watches %d, per user %d", o.MaxWatches, o.MaxWatchesPerUser)
				}
			}},
		{name: "negative per-user watch limit", args: []string{"--max-watches-per-user=-1"}, wantErr: "--max-watches-per-user=-1"},
		{name: "reader cache", args: []string{"--reader-cache-bytes=1048576"},
			check: func(t *testing.T, o *Options) {
				if o.ReaderCacheBytes != 1<<20 {
					t.Errorf("reader cache bytes %d, want 1 MiB", o.ReaderCacheBytes)
				}
			}},
		{name: "negative reader cache", args: []string{"--reader-cache-bytes=-1"}, wantErr: "--reader-cache-bytes=-1"},
		{name: "answer budget", args: []string{"--answer-bytes=2097152"},
			check: func(t *testing.T, o *Options) {
				if o.AnswerBytes != 2<<20 {
					t.Errorf("answer bytes %d, want 2 MiB", o.AnswerBytes)
				}
			}},
		{name: "negative answer budget", args: []string{"--answer-bytes=-1"}, wantErr: "--answer-bytes=-1"},
		{name: "prometheus needs a URL", args: []string{"--source=prometheus"}, wantErr: "--source=prometheus needs --prometheus-url"},
		{name: "prometheus header without value", args: []string{"--source=prometheus", "--prometheus-url=http://127.0.0.1:9090",
			"--prometheus-header=X-Scope-OrgID=a", "--prometheus-header=Authorization: Bearer s3cret"},
			wantErr: `--prometheus-header number 2 (not shown: it may hold credentials): want Name=value`},
		{name: "prometheus URL that does not parse is not quoted with its password", args: []string{"--source=prometheus",
			"--prometheus-url=http://user:s3cret@prometheus:90 90"}, wantErr: `--prometheus-url "http://(redacted)": want an absolute`},
		{name: "prometheus basic auth", args: []string{"--source=prometheus", "--prometheus-url=http://127.0.0.1:9090",
			"--prometheus-basic-auth-username=adapter", "--prometheus-basic-auth-password-file=/var/run/password"},
			check: func(t *testing.T, o *Options) {
				if ao, err := o.Prometheus.adapterOptions(); err != nil || ao.BasicAuthUsername != "adapter" ||
					ao.BasicAuthPasswordFile != "/var/run/password" {
					t.Errorf("adapter options %+v, err %v: want the basic auth flags", ao, err)
				}
			}},
		{name: "prometheus basic auth needs a password file", args: []string{"--source=prometheus",
			"--prometheus-url=http://127.0.0.1:9090", "--prometheus-basic-auth-username=adapter"},
			wantErr: "--prometheus-basic-auth-username and --prometheus-basic-auth-password-file go together"},
		{name: "prometheus credentials in the URL and a token", args: []string{"--source=prometheus",
			"--prometheus-url=http://user:s3cret@127.0.0.1:9090", "--prometheus-token-file=/t"},
			wantErr: "--prometheus-url carries credentials"},
		{name: "prometheus", args: []string{"--source=prometheus", "--prometheus-url=http://127.0.0.1:9090", "--metric-resolution=5s",
			"--prometheus-verb=POST", "--prometheus-header=X-Scope-OrgID=team-a", "--prometheus-token-file=/var/run/token",
			"--prometheus-max-response-bytes=1048576"},
			check: func(t *testing.T, o *Options) {
				ao, err := o.Prometheus.adapterOptions()
				if err != nil || ao.URL != "http://127.0.0.1:9090" || ao.Method != "POST" || ao.Headers["X-Scope-OrgID"] != "team-a" ||
					ao.BearerTokenFile != "/var/run/token" || ao.Timeout != 4500*time.Millisecond ||
					ao.MaxResponseBytes != 1<<20 {
					t.Errorf("adapter options %+v, err %v: want the flags, and the query timeout fitted to 90%% of the resolution", ao, err)
				}
			}},
		{name: "prometheus response cap defaults to 64 MiB", args: []string{"--source=prometheus", "--prometheus-url=http://127.0.0.1:9090"},
			check: func(t *testing.T, o *Options) {
				if ao, err := o.Prometheus.adapterOptions(); err != nil || ao.MaxResponseBytes != 64<<20 {
					t.Errorf("max response bytes %d, err %v", ao.MaxResponseBytes, err)
				}
			}},
		{name: "prometheus response cap must be positive", args: []string{"--source=prometheus", "--prometheus-url=http://127.0.0.1:9090",
			"--prometheus-max-response-bytes=0"}, wantErr: "--prometheus-max-response-bytes=0 must be positive"},
		{name: "prometheus verb is checked with the flags", args: []string{"--source=prometheus", "--prometheus-url=http://127.0.0.1:9090",
			"--prometheus-verb=DELETE"}, wantErr: `--prometheus-verb "DELETE": want GET or POST`},
		{name: "unknown source", args: []string{"--source=statsd"}, wantErr: `--source="statsd" is unknown`},
		{name: "history too short", args: []string{"--history=1"}, wantErr: "--history=1"},
		{name: "sub-second resolution", args: []string{"--metric-resolution=500ms"}, wantErr: "at least 1s"},
		{name: "CA and insecure", args: []string{"--kubelet-insecure-tls", "--kubelet-certificate-authority=/ca"},
			wantErr: "cannot use both --kubelet-certificate-authority and --kubelet-insecure-tls"},
		{name: "cert without key", args: []string{"--kubelet-client-certificate=/c"}, wantErr: "need both --kubelet-client-key"},
		{name: "bad node selector", args: []string{"-l", "a in ("}, wantErr: "invalid --node-selector"},
		{name: "zero request timeout", args: []string{"--kubelet-request-timeout=0"}, wantErr: "kubelet-request-timeout should be positive"},
		{name: "zero kubelet port", args: []string{"--kubelet-port=0"}, wantErr: "kubelet-port 0 is out of range 1-65535"},
		{name: "completely insecure and insecure TLS", args: []string{"--deprecated-kubelet-completely-insecure", "--kubelet-insecure-tls"},
			wantErr: "cannot use both --kubelet-insecure-tls and --deprecated-kubelet-completely-insecure"},
		{name: "unknown flag", args: []string{"--no-such-flag"}, wantErr: "unknown flag"},
		{name: "completely insecure is plain http", args: []string{"--deprecated-kubelet-completely-insecure"},
			check: func(t *testing.T, o *Options) {
				so, err := o.Kubelet.ScraperOptions(nil)
				if err != nil || so.Scheme != "http" {
					t.Errorf("scheme %q err %v", so.Scheme, err)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, _, err := parse(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || strings.Count(err.Error(), tc.wantErr) != 1 {
					t.Fatalf("want an error containing %q once, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

func TestVersion(t *testing.T) {
	version.Version, version.Commit = "v9.9.9", "abc1234"
	_, out, err := parse(t, "--version")
	if err != nil || !strings.Contains(out, "v9.9.9") || !strings.Contains(out, "abc1234") {
		t.Fatalf("--version printed %q, err %v", out, err)
	}
}

// metricsServerFlags is every flag of metrics-server v0.9.0 (its docs/command-line-flags.txt).
var metricsServerFlags = []string{"kubeconfig", "metric-resolution", "version", "advertise-address", "cors-allowed-origins", "emulated-version", "emulation-forward-compatible", "external-hostname", "feature-gates", "goaway-chance", "livez-grace-period", "max-mutating-requests-inflight", "max-requests-inflight", "min-compatibility-version", "min-request-timeout", "request-timeout", "runtime-config-emulation-forward-compatible", "shutdown-delay-duration", "shutdown-send-retry-after", "shutdown-watch-termination-grace-period", "storage-initialization-timeout", "strict-transport-security-directives", "deprecated-kubelet-completely-insecure", "kubelet-certificate-authority", "kubelet-client-certificate", "kubelet-client-key", "kubelet-insecure-tls", "kubelet-port", "kubelet-preferred-address-types", "kubelet-request-timeout", "kubelet-use-node-status-port", "node-selector", "bind-address", "cert-dir", "disable-http2-serving", "http2-max-streams-per-connection", "permit-address-sharing", "permit-port-sharing", "secure-port", "tls-cert-file", "tls-cipher-suites", "tls-curve-preferences", "tls-min-version", "tls-private-key-file", "tls-sni-cert-key", "authentication-kubeconfig", "authentication-skip-lookup", "authentication-token-webhook-cache-ttl", "authentication-tolerate-lookup-failure", "client-ca-file", "requestheader-allowed-names", "requestheader-client-ca-file", "requestheader-extra-headers-prefix", "requestheader-group-headers", "requestheader-uid-headers", "requestheader-username-headers", "authorization-always-allow-paths", "authorization-kubeconfig", "authorization-webhook-cache-authorized-ttl", "authorization-webhook-cache-unauthorized-ttl", "audit-log-batch-buffer-size", "audit-log-batch-max-size", "audit-log-batch-max-wait", "audit-log-batch-throttle-burst", "audit-log-batch-throttle-enable", "audit-log-batch-throttle-qps", "audit-log-compress", "audit-log-format", "audit-log-maxage", "audit-log-maxbackup", "audit-log-maxsize", "audit-log-mode", "audit-log-path", "audit-log-truncate-enabled", "audit-log-truncate-max-batch-size", "audit-log-truncate-max-event-size", "audit-log-version", "audit-policy-file", "audit-webhook-batch-buffer-size", "audit-webhook-batch-max-size", "audit-webhook-batch-max-wait", "audit-webhook-batch-throttle-burst", "audit-webhook-batch-throttle-enable", "audit-webhook-batch-throttle-qps", "audit-webhook-config-file", "audit-webhook-initial-backoff", "audit-webhook-mode", "audit-webhook-truncate-enabled", "audit-webhook-truncate-max-batch-size", "audit-webhook-truncate-max-event-size", "audit-webhook-version", "contention-profiling", "debug-socket-path", "enable-priority-and-fairness", "profiling", "log-flush-frequency", "log-json-info-buffer-size", "log-json-split-stream", "log-text-info-buffer-size", "log-text-split-stream", "logging-format", "v", "vmodule"}

func TestEveryMetricsServerFlagIsAccepted(t *testing.T) {
	nfs := NewOptions().Flags()
	for _, name := range metricsServerFlags {
		found := false
		for _, fs := range nfs.FlagSets {
			if fs.Lookup(name) != nil {
				found = true
			}
		}
		if !found {
			t.Errorf("--%s is not accepted", name)
		}
	}
	if len(metricsServerFlags) < 100 {
		t.Fatalf("only %d metrics-server flags listed", len(metricsServerFlags))
	}
	// -l is node-selector's shorthand in metrics-server.
	if o, _, err := parse(t, "-l", "a=b"); err != nil || o.Kubelet.NodeSelector != "a=b" {
		t.Errorf("-l: %v", err)
	}
}
