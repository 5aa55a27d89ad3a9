package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// nodesPerSimProcess keeps each simulator process well inside a 20,000 open-file limit: a listener and an
// accepted connection per node, plus a few for the process itself.
const nodesPerSimProcess = 4000

// simConfig is the simulated cluster of a run; PortBase is set when other processes serve it.
func (o options) simConfig() kubeletsim.Config {
	cfg := kubeletsim.Config{Nodes: o.nodes, PodsPerNode: o.pods, ContainersPerPod: o.containers,
		Namespaces: o.nsCount, Host: "127.0.0.1", FastResource: true, FreshStats: o.freshStats}
	if o.attack || o.hpa > 0 {
		cfg.WorkloadPods = o.hpaPods
	}
	cfg.Spread, cfg.SpreadSeed = o.spread, o.churnSeed
	if o.simProcesses > 0 {
		cfg.PortBase, cfg.Shards = o.simPortBase, o.simProcesses
	}
	return cfg
}

// simProcessesFor is the automatic -sim-processes: at least one, so the simulator never shares a Go scheduler
// (or an open-file limit) with the benchmark's load clients.
func simProcessesFor(nodes int) int { return max(1, (nodes+nodesPerSimProcess-1)/nodesPerSimProcess) }

// simShards are the child processes serving the simulated kubelets: this binary run again with -sim-shard.
type simShards struct {
	procs []*exec.Cmd
	// stdin carries churn Steps, one JSON line each; closing it ends that child, also if this process dies
	// without cleaning up.
	stdin []io.WriteCloser
	mu    sync.Mutex // one Step's line at a time
}

// forward hands st to every child, which applies it to its share of the cluster.
func (s *simShards) forward(st kubeletsim.Step) error {
	line, err := json.Marshal(st)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, w := range s.stdin {
		if _, err := w.Write(line); err != nil {
			return fmt.Errorf("handing a churn step to simulator shard %d: %w", k, err)
		}
	}
	return nil
}

// startSimShards starts o.simProcesses children, each serving the nodes of its shard of sim's cluster with
// sim's CA, and returns once every one listens. Logs go to the run folder.
func startSimShards(ctx context.Context, o options, sim *kubeletsim.Sim) (*simShards, error) {
	bundle, err := sim.CABundlePEM()
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(o.dir, "kubelet-ca-bundle.pem")
	if err := os.WriteFile(caFile, bundle, 0o600); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to run the simulator: %w", err)
	}
	s := &simShards{}
	fmt.Fprintf(os.Stderr, "serving %d simulated kubelets from %d processes on ports %d-%d...\n",
		o.nodes, o.simProcesses, o.simPortBase, o.simPortBase+o.nodes-1)
	for k := range o.simProcesses {
		if err := s.start(ctx, o, self, caFile, k); err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *simShards) start(ctx context.Context, o options, self, caFile string, k int) error {
	logPath := filepath.Join(o.dir, fmt.Sprintf("kubeletsim-%d.log", k))
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close() // the child holds its own descriptor
	cmd := exec.Command(self, o.shardArgs(k, caFile)...)
	cmd.Stderr = log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting simulator shard %d: %w", k, err)
	}
	s.procs, s.stdin = append(s.procs, cmd), append(s.stdin, stdin)
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() && sc.Text() == "ready" {
			ready <- nil
		} else {
			ready <- fmt.Errorf("simulator shard %d exited before serving (log: %s)", k, logPath)
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		return err
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("simulator shard %d not serving after 2 minutes (log: %s)", k, logPath)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pids names each child for the CPU table.
func (s *simShards) pids() map[string]int {
	out := map[string]int{}
	for k, c := range s.procs {
		out[fmt.Sprintf("simulator process %d", k)] = c.Process.Pid
	}
	return out
}

// stop ends every child: their stdin closes, and any still there after 10 s are killed.
func (s *simShards) stop() {
	for _, c := range s.stdin {
		_ = c.Close()
	}
	for _, c := range s.procs {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
}

// shardArgs are the flags of simulator shard k's process: whatever decides what the kubelets serve (simConfig, but
// the workload labels, which no kubelet serves) is passed, so that the child serves the cluster this process
// registered, each pod on the same node.
func (o options) shardArgs(k int, caFile string) []string {
	return []string{"-sim-shard", strconv.Itoa(k), "-sim-processes", strconv.Itoa(o.simProcesses),
		"-sim-port-base", strconv.Itoa(o.simPortBase), "-sim-ca-bundle", caFile,
		"-nodes", strconv.Itoa(o.nodes), "-pods", strconv.Itoa(o.pods),
		"-containers", strconv.Itoa(o.containers), "-namespaces", strconv.Itoa(o.nsCount),
		"-fresh-stats=" + strconv.FormatBool(o.freshStats), "-spread=" + strconv.FormatBool(o.spread),
		"-churn-seed", strconv.FormatUint(o.churnSeed, 10)}
}

// serveSimShard is the child's whole life: serve one shard, applying the churn Steps read from stdin, until
// stdin closes (the parent stopped or died) or a signal arrives.
func serveSimShard(ctx context.Context, o options) error {
	bundle, err := os.ReadFile(o.simCABundle)
	if err != nil {
		return err
	}
	cfg := o.simConfig()
	cfg.Shard, cfg.CA = o.simShard, bundle
	raiseOpenFiles(os.Stderr, o.nodes/max(1, o.simProcesses))
	sim, err := kubeletsim.New(cfg)
	if err != nil {
		return err
	}
	if err := sim.Start(ctx); err != nil {
		return err
	}
	defer sim.Stop()
	fmt.Println("ready")
	eof := make(chan struct{})
	go func() { applySteps(sim, os.Stdin, os.Stderr); close(eof) }()
	select {
	case <-eof:
		return nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil
		}
		return ctx.Err()
	}
}

// applySteps applies every Step read from r, one JSON line each, until r ends. A Step that does not apply is
// logged: this shard then serves a cluster the parent's Truth does not describe, which the parent's checks see.
func applySteps(sim *kubeletsim.Sim, r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var st kubeletsim.Step
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			fmt.Fprintf(log, "bench-scale: simulator shard: bad step %q: %v\n", sc.Text(), err)
			continue
		}
		if err := sim.Apply(st); err != nil {
			fmt.Fprintf(log, "bench-scale: simulator shard: %v\n", err)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}
