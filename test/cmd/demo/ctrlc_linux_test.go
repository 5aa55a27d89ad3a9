package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMakeDemoCtrlC runs `make demo` on a terminal as a user does, types Ctrl-C once it says so, and requires make
// to end with status 0 and no process of the demo left (before the demo took the terminal, make said "Error 1"
// and died of SIGINT).
func TestMakeDemoCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("brings up a control plane")
	}
	ptm, pts := openPTY(t)
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "demo", "DEMO_FLAGS=-nodes 1 -pods 1 -real-node=false -dir "+dir)
	cmd.Dir = root
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	// A session of its own with the terminal as its controlling one: make is the foreground job, as in a shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	out := &lockedBuffer{}
	go func() { _, _ = out.ReadFrom(ptm) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	deadline := time.After(10 * time.Minute)
	for !strings.Contains(out.String(), "Press Ctrl-C") {
		select {
		case err := <-done:
			t.Fatalf("make demo ended before it was ready: %v\n%s", err, out.String())
		case <-deadline:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("make demo not ready after 10 minutes:\n%s", out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := ptm.Write([]byte{3}); err != nil { // Ctrl-C: the terminal signals its foreground group
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("make demo still running 2 minutes after Ctrl-C:\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("make demo after Ctrl-C: %v, want exit status 0; output:\n%s", err, tail(out.String()))
	}
	if strings.Contains(out.String(), "Error 1") || strings.Contains(out.String(), "Interrupt") {
		t.Errorf("make reported a failure after a clean stop:\n%s", tail(out.String()))
	}
	// Every process the demo started runs with the run folder in its flags.
	if ps, _ := exec.Command("pgrep", "-f", dir).Output(); len(bytes.TrimSpace(ps)) > 0 {
		t.Errorf("processes of the demo still running after it exited: %s", ps)
	}
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("naming the pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pseudo-terminal: %v", err)
	}
	return m, s
}

func tail(s string) string {
	if len(s) > 3000 {
		return s[len(s)-3000:]
	}
	return s
}

// lockedBuffer is a bytes.Buffer one goroutine fills while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) ReadFrom(f *os.File) (int64, error) {
	buf := make([]byte, 4096)
	var total int64
	for {
		n, err := f.Read(buf)
		l.mu.Lock()
		l.b.Write(buf[:n])
		l.mu.Unlock()
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
