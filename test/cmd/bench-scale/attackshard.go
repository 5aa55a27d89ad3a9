package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// The attacking users' clients run in a process of their own at the lowest priority (-attack-nice): in a cluster
// they are elsewhere, and in this process they took the machine's cores from the server and from the HPA-like
// clients, reading and counting every byte of hundreds of megabytes a second, so that the HPA's latency measured
// the machine rather than the server (BENCHMARKS.md, issue 26 finding 1).

// attackShard is what the attacking process is told on its standard input.
type attackShard struct {
	Base, ServerName string
	CAPEM            []byte
	Users            []shardUser
	Selectors, Pods  int
	MaxRequests      int64
	Until            time.Time
}

// shardUser is one attacking user: its index (its selectors) and its client certificate.
type shardUser struct {
	Index           int
	CertPEM, KeyPEM []byte
}

// shardTally is an attackTally as the attacking process writes it on its standard output.
type shardTally struct {
	Requests, Complete, TooMany, Errors, Short, Cancelled int
	Kinds                                                 map[string]int
}

// runAttackProcess runs users' attacks in a child process at nice 19 until deadline, and returns their tallies.
func runAttackProcess(ctx context.Context, o options, cp *framework.ControlPlane, b *framework.Backend, users int,
	deadline time.Time) ([]*attackTally, error) {
	spec := attackShard{Base: b.URL(), ServerName: b.ServerName(), CAPEM: b.ServingCAPEM(), Selectors: o.attackSelectors,
		Pods: o.nodes * o.pods, MaxRequests: int64(o.attackMaxRequests), Until: deadline}
	dir := filepath.Join(cp.Dir, "users")
	for u := range users {
		name := fmt.Sprintf("bench-attacker-%d", u)
		kp, err := cp.ClientCA.Issue(dir, name, framework.CertSpec{CommonName: name, Organization: []string{readersGroup}})
		if err != nil {
			return nil, err
		}
		spec.Users = append(spec.Users, shardUser{Index: u, CertPEM: kp.CertPEM, KeyPEM: kp.KeyPEM})
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "nice", "-n", "19", self, "-attack-shard")
	cmd.Stdin, cmd.Stderr = bytes.NewReader(in), os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("the attacking process: %w", err)
	}
	var got []shardTally
	if err := json.Unmarshal(out, &got); err != nil || len(got) != users {
		return nil, fmt.Errorf("the attacking process answered %d tallies of %d users: %v", len(got), users, err)
	}
	tallies := make([]*attackTally, users)
	for i, t := range got {
		tallies[i] = &attackTally{requests: t.Requests, complete: t.Complete, tooMany: t.TooMany, errors: t.Errors,
			short: t.Short, cancelled: t.Cancelled, kinds: t.Kinds}
	}
	return tallies, nil
}

// serveAttackShard is the attacking process: it reads its attackShard, attacks until its deadline, and writes the
// users' tallies.
func serveAttackShard(ctx context.Context) error {
	var spec attackShard
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		return fmt.Errorf("reading the attack: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(spec.CAPEM) {
		return errors.New("no serving CA in the attack")
	}
	actx, cancel := context.WithDeadline(ctx, spec.Until)
	defer cancel()
	var budget atomic.Int64
	budget.Store(spec.MaxRequests)
	out := make([]shardTally, len(spec.Users))
	var wg sync.WaitGroup
	for i, u := range spec.Users {
		cert, err := tls.X509KeyPair(u.CertPEM, u.KeyPEM)
		if err != nil {
			return fmt.Errorf("user %d's certificate: %w", u.Index, err)
		}
		hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableCompression: true,
			TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, ServerName: spec.ServerName,
				Certificates: []tls.Certificate{cert}}}}
		wg.Go(func() {
			t := runAttacker(actx, hc, spec.Base, u.Index, spec.Selectors, spec.Pods, &budget)
			out[i] = shardTally{Requests: t.requests, Complete: t.complete, TooMany: t.tooMany, Errors: t.errors,
				Short: t.short, Cancelled: t.cancelled, Kinds: t.kinds}
		})
	}
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(out)
}
