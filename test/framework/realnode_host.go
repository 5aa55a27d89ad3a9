package framework

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What a real node makes on the host carries realNodePrefix (its state folder, its cgroup root, its NAT rule) or
// realNodeLinkPrefix (its links), so that sweepRealNodes finds what a killed run left and nothing else.
const (
	realNodePrefix = "metrics-ring-realnode-"
	// Files in the state folder that say what to undo.
	sysctlsFile  = "sysctls.orig"    // kernel tunables the kubelet sets, as they were
	iptablesFile = "iptables.absent" // the kubelet's chains that were not there before it
	dirsFile     = "dirs.created"    // host folders made only to mount over them
)

// kubeletSysctls are the kernel tunables the kubelet sets when protectKernelDefaults is false (it refuses to
// start otherwise unless they already have its values), and ip_forward, which the CNI bridge plugin sets for a
// gateway; they are put back when the node stops.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
}

// kubeletChains are the iptables chains the kubelet makes when iptables is installed: table, chain, and the
// built-in chains that jump to it.
var kubeletChains = []struct {
	table, chain string
	from         []string
}{
	{"mangle", "KUBE-IPTABLES-HINT", nil},
	{"filter", "KUBE-FIREWALL", []string{"INPUT", "OUTPUT"}},
	{"mangle", "KUBE-KUBELET-CANARY", nil},
	{"nat", "KUBE-KUBELET-CANARY", nil},
	{"filter", "KUBE-KUBELET-CANARY", nil},
}

// recordHostState writes what the node's teardown must put back into dir: the kernel tunables' values and
// which of the kubelet's iptables chains are absent (ip6tables too).
func recordHostState(dir string) error {
	var sys bytes.Buffer
	for _, k := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return fmt.Errorf("reading kernel tunable %s: %w", k, err)
		}
		fmt.Fprintf(&sys, "%s %s\n", k, strings.TrimSpace(string(v)))
	}
	if err := os.WriteFile(filepath.Join(dir, sysctlsFile), sys.Bytes(), 0o600); err != nil {
		return fmt.Errorf("recording kernel tunables: %w", err)
	}
	var absent bytes.Buffer
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(ipt); err != nil {
			continue
		}
		for _, c := range kubeletChains {
			if exec.Command(ipt, "-w", "-t", c.table, "-S", c.chain).Run() != nil {
				fmt.Fprintf(&absent, "%s %s %s\n", ipt, c.table, c.chain)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, iptablesFile), absent.Bytes(), 0o600); err != nil {
		return fmt.Errorf("recording iptables chains: %w", err)
	}
	return nil
}

// restoreHostState puts back what recordHostState wrote in dir, if it wrote it.
func restoreHostState(dir string, out io.Writer) {
	if data, err := os.ReadFile(filepath.Join(dir, sysctlsFile)); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			k, v, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			cur, _ := os.ReadFile(filepath.Join("/proc/sys", k))
			if strings.TrimSpace(string(cur)) == v {
				continue
			}
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
				fmt.Fprintf(out, "real node: restoring kernel tunable %s to %s: %v\n", k, v, err)
			}
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, iptablesFile)); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				continue
			}
			removeChain(f[0], f[1], f[2])
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, dirsFile)); err == nil {
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if lines[i] != "" {
				os.Remove(lines[i]) // only if empty: something else may have used it since
			}
		}
	}
}

// removeChain deletes a chain the kubelet made, and the jumps to it.
func removeChain(ipt, table, chain string) {
	for _, c := range kubeletChains {
		if c.table != table || c.chain != chain {
			continue
		}
		for _, from := range c.from {
			for exec.Command(ipt, "-w", "-t", table, "-D", from, "-j", chain).Run() == nil {
			}
		}
	}
	_ = exec.Command(ipt, "-w", "-t", table, "-F", chain).Run()
	_ = exec.Command(ipt, "-w", "-t", table, "-X", chain).Run()
}

// cgroupMounts lists the mount points of every cgroup hierarchy (v1 controllers, named ones, and v2).
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, x := range fields {
			if x == "-" && i+1 < len(fields) && (fields[i+1] == "cgroup" || fields[i+1] == "cgroup2") {
				mounts = append(mounts, unescapeMount(fields[4]))
			}
		}
	}
	return mounts, sc.Err()
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// makeCgroupRoot creates name under every hierarchy (the kubelet requires its cgroupRoot to exist in each),
// with the parent's CPUs and memory nodes in cpuset's.
func makeCgroupRoot(name string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		dir := filepath.Join(m, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("writing %s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// removeCgroups kills every process in the cgroups whose names match pattern (filepath.Match's) at the top of
// any hierarchy and removes them, deepest first. It returns what it could not remove.
func removeCgroups(pattern string, out io.Writer) []string {
	mounts, _ := cgroupMounts()
	var roots []string
	for _, m := range mounts {
		matches, _ := filepath.Glob(filepath.Join(m, pattern))
		roots = append(roots, matches...)
	}
	if len(roots) == 0 {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pids []int
		for _, r := range roots {
			pids = append(pids, cgroupPids(r)...)
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var left []string
	for _, r := range roots {
		var dirs []string
		_ = filepath.Walk(r, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := rmdirRetry(d); err != nil {
				left = append(left, d)
				fmt.Fprintf(out, "real node: removing cgroup %s: %v\n", d, err)
			}
		}
	}
	return left
}

// rmdirRetry removes an empty cgroup, waiting a little for its last processes' exit to be accounted.
func rmdirRetry(d string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = syscall.Rmdir(d); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// cgroupPids lists the processes in the cgroup at dir and below.
func cgroupPids(dir string) []int {
	var pids []int
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || fi.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// killByCmdline SIGKILLs every process (but this one) whose command line mentions s, the state folder of a
// node: its kubelet and containerd, and the runc shims containerd started in their own sessions.
func killByCmdline(s string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, []byte(s)) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// unmountUnder detaches every mount at or below dir (deepest first) seen from this mount namespace.
func unmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			if mp := unescapeMount(f[4]); mp == dir || strings.HasPrefix(mp, dir+"/") {
				points = append(points, mp)
			}
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, mp := range points {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}
