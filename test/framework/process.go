package framework

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one program of the control plane, run in its own process group so that stopping it also stops
// anything it spawned, with its output appended to a log file (restarts append to the same file).
type Process struct {
	Name    string
	Path    string
	Args    []string
	LogFile string
	// Env is added to this process's environment (KEY=VALUE), e.g. a GODEBUG for the server under test alone. A
	// key this process has too takes Env's value (for GODEBUG, Env's settings only: not merged).
	Env []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// NewProcess describes a process whose log goes to dir/name.log. It does not start it.
func NewProcess(dir, name, path string, args ...string) *Process {
	return &Process{Name: name, Path: path, Args: args, LogFile: filepath.Join(dir, name+".log")}
}

// Start runs the process. It is an error to start a running process.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s is already running", p.Name)
	}
	logf, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s log: %w", p.Name, err)
	}
	fmt.Fprintf(logf, "==== %s starting at %s: %s %q\n", p.Name, time.Now().Format(time.RFC3339), p.Path, p.Args)
	if len(p.Env) > 0 { // names only: a value may be a secret
		fmt.Fprintf(logf, "==== with its own environment: %s\n", envNames(p.Env))
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err = cmd, done, nil
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// envNames lists the keys of KEY=VALUE entries.
func envNames(env []string) string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	return strings.Join(names, " ")
}

// Exited reports whether a started process has ended, and how.
func (p *Process) Exited() (bool, error) {
	p.mu.Lock()
	done, err := p.done, p.err
	p.mu.Unlock()
	if done == nil {
		return true, errors.New("not started")
	}
	select {
	case <-done:
		return true, err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace. It is safe to call on a stopped process.
func (p *Process) Stop(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
	// Anything the leader left behind in its group goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// Terminate sends SIGTERM to the process group and returns at once, so that a test can watch the shutdown;
// Exited tells when it is over, and Stop still cleans up.
func (p *Process) Terminate() error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
}

// Kill stops the process group at once with SIGKILL, as a crash would.
func (p *Process) Kill() { p.Stop(0) }

// Tail returns the last n lines of the log.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.LogFile)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return tailLines(data, n)
}

func tailLines(data []byte, n int) string {
	data = bytes.TrimRight(data, "\n")
	i := len(data)
	for ; n > 0 && i > 0; n-- {
		i = bytes.LastIndexByte(data[:i], '\n')
		if i < 0 {
			i = 0
		}
	}
	if i > 0 {
		i++
	}
	return string(data[i:])
}

// DumpTail writes a labelled tail of the log to w.
func (p *Process) DumpTail(w io.Writer, n int) {
	fmt.Fprintf(w, "----- last %d lines of %s (%s) -----\n%s\n", n, p.Name, p.LogFile, p.Tail(n))
}
