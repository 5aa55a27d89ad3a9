package framework

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on every Linux platform Go
// supports (the kernel fixes the value it exports regardless of CONFIG_HZ).
const clockTicks = 100

// ProcStat is one reading of a process's CPU time and memory from /proc, for the scale benchmark.
type ProcStat struct {
	// CPU is user + system time since the process started.
	CPU time.Duration
	// RSS is VmRSS now; PeakRSS is VmHWM, the high-water mark since start.
	RSS, PeakRSS uint64
	// RSSFile is the part of RSS backed by files (RssFile: mostly the executable's pages the process has touched);
	// RSSAnon is its anonymous memory (RssAnon: heap, stacks, the runtime's own structures).
	RSSFile, RSSAnon uint64
}

// Pid is the running process's id, or 0 when it is not running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stat reads the process's CPU time and memory from /proc.
func (p *Process) Stat() (ProcStat, error) {
	pid := p.Pid()
	if pid == 0 {
		return ProcStat{}, fmt.Errorf("%s is not running", p.Name)
	}
	return ReadProcStat(pid)
}

// Processes lists every process this control plane started (etcd, kube-apiserver, backends, ...).
func (cp *ControlPlane) Processes() []*Process {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]*Process(nil), cp.procs...)
}

// ReadProcStat reads pid's utime+stime from /proc/<pid>/stat and VmRSS, VmHWM, RssFile and RssAnon from
// /proc/<pid>/status.
// Children are not included: every program here is a single process.
func ReadProcStat(pid int) (ProcStat, error) {
	var st ProcStat
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, fmt.Errorf("reading stat of pid %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return st, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(raw[i+1:]))
	// After the name: state is field 3, utime field 14, stime field 15 (proc(5)), i.e. f[11] and f[12].
	if len(f) < 13 {
		return st, fmt.Errorf("short /proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return st, fmt.Errorf("parsing /proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	st.CPU = time.Duration(ticks) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, fmt.Errorf("reading status of pid %d: %w", pid, err)
	}
	for line := range strings.Lines(string(status)) {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var field *uint64
		switch name {
		case "VmRSS":
			field = &st.RSS
		case "VmHWM":
			field = &st.PeakRSS
		case "RssFile":
			field = &st.RSSFile
		case "RssAnon":
			field = &st.RSSAnon
		default:
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return st, fmt.Errorf("parsing %s of pid %d: %w", name, pid, err)
		}
		*field = kb << 10
	}
	return st, nil
}
