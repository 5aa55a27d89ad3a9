package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestShutdown follows DESIGN.md section 5's SIGTERM (here: Run's context ending): /readyz fails within a second, lists
// and a watch opened before go on being served, with fresh collections, for --shutdown-delay-duration; then the
// server ends the watch and Run returns. Only "at least the delay" and generous upper bounds are timed.
func TestShutdown(t *testing.T) {
	const delay = 5 * time.Second
	f := startFixture(t, "--shutdown-delay-duration="+delay.String())
	if body := f.waitReady(t); !strings.Contains(body, "readyz check passed") {
		t.Fatalf("/readyz never passed:\n%s", body)
	}
	// The loopback identity is in system:masters: allowed without a SubjectAccessReview.
	loopback := f.w.Server.LoopbackClientConfig
	admin, err := rest.HTTPClientFor(loopback)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.CloseIdleConnections()
	nodes := loopback.Host + "/apis/metrics.k8s.io/v1beta1/nodes"
	listNodes := func() error {
		resp, err := admin.Get(nodes)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var l struct{ Items []json.RawMessage }
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != http.StatusOK || len(l.Items) != 1 {
			return fmt.Errorf("list nodes: status %d, %d items, %v; want 200 with node-1", resp.StatusCode, len(l.Items), err)
		}
		return nil
	}
	for i := 0; listNodes() != nil && i < 100; i++ { // bounded: node-1 is servable after its second scrape
		time.Sleep(50 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, nodes+"?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch nodes: status %d", resp.StatusCode)
	}
	events := make(chan string, 100)
	go func() {
		defer close(events)
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct{ Type string }
			if dec.Decode(&ev) != nil {
				return
			}
			events <- ev.Type
		}
	}()
	if ev := <-events; ev != "ADDED" {
		t.Fatalf("first watch event %q, want ADDED", ev)
	}

	sigterm := time.Now()
	f.stop()
	if err := listNodes(); err != nil {
		t.Fatalf("during the shutdown delay: %v", err)
	}
	// The context's end reaches the server through its own goroutine, so /readyz may pass for a moment after it
	// (seen on a loaded machine); a load balancer's next probe, not this instant, is what must see the failure.
	code, body, err := insecureGet("https://" + f.addr + "/readyz?verbose")
	for i := 0; err == nil && code == http.StatusOK && i < 20; i++ { // bounded: a second, well inside the delay
		time.Sleep(50 * time.Millisecond)
		code, body, err = insecureGet("https://" + f.addr + "/readyz?verbose")
	}
	if err != nil || code == http.StatusOK || !strings.Contains(body, "[-]shutdown") {
		t.Fatalf("/readyz a second after SIGTERM: %d %v\n%s\nwant a failure naming the shutdown check", code, err, body)
	}
	// The watch goes on with the next collections (the source outlives the signal), then the server ends it.
	var modified int
	for ev := range events { // the server closes it; the request's context bounds it
		if ev == "MODIFIED" {
			modified++
		}
	}
	ended := time.Since(sigterm)
	if modified == 0 {
		t.Error("no MODIFIED event after SIGTERM: collection stopped with the signal, not with the server")
	}
	if ended < delay {
		t.Errorf("the watch ended %v after SIGTERM, before the %v delay", ended, delay)
	}
	if ok, err := f.wait(30 * time.Second); !ok || err != nil { // a generous bound for "exits eventually"
		t.Fatalf("Run after SIGTERM: returned %v, err %v", ok, err)
	}
	if err := listNodes(); err == nil {
		t.Error("the server still answers after Run returned")
	}
}
