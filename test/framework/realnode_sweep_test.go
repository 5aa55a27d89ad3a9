package framework

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestTeardownLeavesAnotherNodeAlone: the teardown of one real node removes its processes, links and NAT rule and
// none of another's, even when the other's folder name begins with its own (two nodes run side by side in
// e2e/realinstall). Before, the teardown killed every process naming the folder's name as a prefix, deleted
// only the first node's bridge and removed every node's NAT rule.
func TestTeardownLeavesAnotherNodeAlone(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("needs Linux and root: it makes links, NAT rules and processes as real nodes do")
	}
	for _, prog := range []string{"ip", "iptables", "tail"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("needs %s: %v", prog, err)
		}
	}
	// Names no real node uses, so that a real node's sweep elsewhere on this machine leaves them alone.
	base := t.TempDir()
	type node struct {
		dir, link string
		proc      *exec.Cmd
		exited    chan struct{}
	}
	nodes := []*node{{dir: filepath.Join(base, "mrtest-12"), link: "mrtestlnk12"}, {dir: filepath.Join(base, "mrtest-123"), link: "mrtestlnk123"}}
	for i, n := range nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.dir, linksFile), []byte(n.link+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if o, err := exec.Command("ip", "link", "add", n.link, "type", "bridge").CombinedOutput(); err != nil {
			t.Fatalf("ip link add: %v: %s", err, o)
		}
		t.Cleanup(func() { deleteLinks([]string{n.link}, io.Discard) })
		if err := addServiceRule(context.Background(), serviceRuleComment(n.dir), "10.255.255.1", int32(40000+i), "127.0.0.1:1"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeServiceRules(serviceRuleComment(n.dir), io.Discard) })
		if err := os.WriteFile(filepath.Join(n.dir, "log"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		// A process whose command line names a file in the folder, as the kubelet's and containerd's do.
		n.proc = exec.Command("tail", "-f", filepath.Join(n.dir, "log"))
		if err := n.proc.Start(); err != nil {
			t.Fatal(err)
		}
		n.exited = make(chan struct{})
		go func() { n.proc.Wait(); close(n.exited) }()
		t.Cleanup(func() { n.proc.Process.Kill(); <-n.exited })
	}
	teardownRealNode(nodes[0].dir, io.Discard)

	select {
	case <-nodes[0].exited:
	case <-time.After(10 * time.Second):
		t.Error("the torn-down node's process still runs")
	}
	select {
	case <-nodes[1].exited:
		t.Error("the other node's process was killed")
	case <-time.After(200 * time.Millisecond):
	}
	for i, n := range nodes {
		_, err := os.Stat(filepath.Join("/sys/class/net", n.link))
		if have, want := err == nil, i == 1; have != want {
			t.Errorf("link %s there: %v, want %v", n.link, have, want)
		}
		rules, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "PREROUTING").Output()
		if err != nil {
			t.Fatal(err)
		}
		if have, want := strings.Contains(string(rules), serviceRuleComment(n.dir)+" "), i == 1; have != want {
			t.Errorf("NAT rule %s there: %v, want %v", serviceRuleComment(n.dir), have, want)
		}
	}
	if _, err := os.Stat(nodes[0].dir); !os.IsNotExist(err) {
		t.Errorf("the torn-down node's folder: %v, want it gone", err)
	}
}
