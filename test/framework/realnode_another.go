package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// StartAnother starts one more real node beside n, named name, and waits until it is Ready: a kubelet and a
// containerd of its own (state folder, sockets, root folders, ports, cgroup root, mount namespace), its own
// address (extraNodeIP) and its own bridge and pod subnet, under the machine's real node lock n holds (so it
// sweeps nothing: what a killed run left is gone already). Its pods reach kube-apiserver through the rule n's
// RouteKubernetesService added (it matches every pod's traffic on the host). Its logs go to n's folder, named
// after it. It stops with its own Stop, or at the latest with n's.
func (n *RealNode) StartAnother(ctx context.Context, cp *ControlPlane, name string) (*RealNode, error) {
	if n.stateDir == "" {
		return nil, fmt.Errorf("starting node %s: node %s is stopped", name, n.Name)
	}
	n.started++
	i := n.index + n.started
	m := &RealNode{Name: name, IP: extraNodeIP(i), index: i, progs: n.progs, kubeletBin: n.kubeletBin, logDir: n.logDir, out: n.out}
	n.others = append(n.others, m)
	fmt.Fprintf(n.out, "real node: starting node %s beside %s (address %s, pods in %s)\n", name, n.Name, m.IP, podSubnet(i))
	if err := m.start(ctx, cp); err != nil {
		return nil, fmt.Errorf("starting node %s beside %s: %w", name, n.Name, err)
	}
	return m, nil
}

// logName is the name of the node's log of program: the first node's keep the program's name.
func (n *RealNode) logName(program string) string {
	if n.index == 0 {
		return program
	}
	return program + "-" + n.Name
}

// lockRealNodes serializes real nodes on this machine (one sweeps what another's killed run left, so two
// must never overlap); the lock goes with the process, however it ends.
func lockRealNodes(ctx context.Context, out io.Writer) (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "metrics-ring-realnode.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the real node lock: %w", err)
	}
	for said := false; ; said = true {
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			return func() { f.Close() }, nil
		}
		if !said {
			fmt.Fprintf(out, "real node: waiting for another run's real node to stop (%s)\n", f.Name())
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another run's real node to stop: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
