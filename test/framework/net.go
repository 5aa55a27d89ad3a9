package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// FreePort returns a TCP port that is free on every given loopback address at the time of the call, so one
// port can serve several backends bound to different addresses.
func FreePort(ips ...string) (int, error) {
	if len(ips) == 0 {
		ips = []string{"127.0.0.1"}
	}
	for attempt := 0; attempt < 50; attempt++ {
		l, err := net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
		if err != nil {
			return 0, fmt.Errorf("listening on %s: %w", ips[0], err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		ok := true
		var others []net.Listener
		for _, ip := range ips[1:] {
			o, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			others = append(others, o)
		}
		for _, o := range others {
			o.Close()
		}
		l.Close()
		if ok {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port free on all of %v", ips)
}

// FreePorts returns n distinct TCP ports free on ip at the time of the call: the listeners are held until all are
// chosen, since ports found one after another by FreePort may repeat (the kernel hands out a port just closed
// again), which made a Thanos Query's HTTP and gRPC addresses one and the same.
func FreePorts(n int, ip string) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, fmt.Errorf("listening on %s: %w", ip, err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// stopPolling marks a condition error that no amount of waiting will fix.
type stopPolling struct{ error }

func (s stopPolling) Unwrap() error { return s.error }

// StopPolling makes Poll return err at once instead of retrying.
func StopPolling(err error) error { return stopPolling{err} }

// Poll calls cond every interval until it returns true, returns an error wrapped by StopPolling, or timeout
// passes. Other condition errors are retried; the last one is returned with what was being waited for.
func Poll(ctx context.Context, what string, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		done, err := cond(ctx)
		if done && err == nil {
			return nil
		}
		var stop stopPolling
		if errors.As(err, &stop) {
			return fmt.Errorf("waiting for %s: %w", what, stop.error)
		}
		// An error caused by the deadline itself says less than the one before it.
		if err != nil && (lastErr == nil || ctx.Err() == nil) {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("waiting for %s (%s): %w", what, timeout, lastErr)
			}
			return fmt.Errorf("waiting for %s: timed out after %s", what, timeout)
		case <-time.After(interval):
		}
	}
}

// httpsClient trusts caPEM and presents the client certificate, if any. Without caPEM it is for plain
// http (etcd's client port).
func httpsClient(caPEM []byte, client *KeyPair) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caPEM != nil {
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("no CA certificate in PEM")
		}
	}
	if client != nil {
		cert, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("loading client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// getStatus GETs url and returns the status code and body.
func getStatus(ctx context.Context, c *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	// Bounded, and large enough for a whole /metrics page.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, string(body), fmt.Errorf("reading %s: %w", url, err)
	}
	return resp.StatusCode, string(body), nil
}
