package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RealNode is a real kubelet (built from the pinned module) on this machine, with Debian's containerd and
// runc and the CNI bridge plugin, registered with a ControlPlane. containerd, its shims and the kubelet share
// one private mount namespace in which tmpfs covers the host paths they write outside their configured
// folders (/run/netns, /run/containerd, /var/lib/cni, /var/log/containers, and /var/lib/kubelet for the
// device plugins' socket, whatever the root folder): when their processes end, the
// namespace ends with every mount and network namespace in it, even if the test binary was killed.
type RealNode struct {
	Name string
	// IP is the node's InternalIP (non-loopback: the kubelet refuses a loopback --node-ip) and Port its
	// kubelet's secure port there.
	IP   string
	Port int
	// CAFile holds the CA of the kubelet's serving certificate: the control plane's (ControlPlane.ServerCA).
	CAFile string
	// CgroupRoot is the kubelet's cgroupRoot, under every hierarchy (without the leading slash).
	CgroupRoot string
	// KubeletVersion is what the kubelet reports in the Node status.
	KubeletVersion string

	stateDir, logDir  string
	healthzPort       int
	progs             NodePrograms
	kubeletBin        string
	containerd, kubel *Process
	out               io.Writer
	// unlock releases the machine's real node lock: the first node's (index 0), which the others share.
	unlock func()
	// index numbers the nodes of a run (0 the first): it picks the bridge, the pods' subnet and the address.
	index int
	// others are the nodes StartAnother started beside this one; started counts them all, stopped or not.
	others  []*RealNode
	started int
}

// hostPathsCovered are the host folders containerd, runc's shim, the CNI plugins and the kubelet write to
// whatever their configuration says; in the node's mount namespace each is a fresh tmpfs.
var hostPathsCovered = []string{"/run/netns", "/run/containerd", "/var/lib/cni", "/var/log/containers", "/var/lib/kubelet"}

// StartRealNode starts a real node named name and waits until it is Ready. logDir receives the kubelet's
// and containerd's logs (keep it on failure); their state lives in a folder of their own under the system's
// temporary folder, removed by Stop. An error wrapping ErrNoRealNode means this machine cannot run one.
// More nodes beside it: StartAnother.
func StartRealNode(ctx context.Context, cp *ControlPlane, name, logDir string, out io.Writer) (*RealNode, error) {
	if err := RealNodePreflight(); err != nil {
		return nil, err
	}
	ip, err := nodeIP()
	if err != nil {
		return nil, err
	}
	progs, err := EnsureNodePrograms(out)
	if err != nil {
		return nil, err
	}
	kubelet, err := EnsureKubelet(DefaultCacheDir(), out)
	if err != nil {
		return nil, err
	}
	unlock, err := lockRealNodes(ctx, out)
	if err != nil {
		return nil, err
	}
	SweepRealNodes(out)
	n := &RealNode{Name: name, IP: ip, progs: progs, kubeletBin: kubelet, logDir: logDir, out: out, unlock: unlock}
	return n, n.start(ctx, cp)
}

// start makes the node's state folder, configuration and cgroup root, starts containerd with the test images
// and the kubelet, and waits until the node is Ready; on failure it writes the logs' tails and stops the node.
func (n *RealNode) start(ctx context.Context, cp *ControlPlane) (err error) {
	defer func() {
		if err != nil {
			n.DumpLogs(n.out, 40)
			n.Stop()
		}
	}()
	if n.stateDir, err = os.MkdirTemp("", realNodePrefix); err != nil {
		return fmt.Errorf("creating the node's state folder: %w", err)
	}
	n.CgroupRoot = filepath.Base(n.stateDir)
	if err := n.prepare(cp); err != nil {
		return err
	}
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	if err := importNodeImages(ctx, n.stateDir, n.progs.Ctr, containerdSocket(n.stateDir), n.out); err != nil {
		return err
	}
	return n.startKubelet(ctx, cp)
}

// prepare writes the node's configuration, certificates and host records, and makes its cgroup root.
func (n *RealNode) prepare(cp *ControlPlane) error {
	// The first node records the host's state as it was; later ones would record the first kubelet's changes.
	if n.index == 0 {
		if err := recordHostState(n.stateDir); err != nil {
			return err
		}
	}
	if err := n.makeLinks(); err != nil {
		return err
	}
	if err := makeCgroupRoot(n.CgroupRoot); err != nil {
		return err
	}
	if err := coverHostPaths(n.stateDir); err != nil {
		return err
	}
	ports, err := FreePorts(1, n.IP)
	if err != nil {
		return err
	}
	n.Port = ports[0]
	if n.healthzPort, err = FreePort(); err != nil {
		return err
	}
	pki := filepath.Join(n.stateDir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", pki, err)
	}
	// Signed by the cluster's CA, as kubelets with serverTLSBootstrap are: a pod verifies it with the CA its
	// ServiceAccount token's volume holds (metrics-ring installed for real needs no --kubelet-insecure-tls).
	ca := cp.ServerCA
	n.CAFile = ca.CertFile
	serving, err := ca.Issue(pki, "kubelet-serving", CertSpec{
		CommonName: n.Name, Server: true, DNSNames: []string{n.Name}, IPs: []net.IP{net.ParseIP(n.IP)},
	})
	if err != nil {
		return err
	}
	// The kubelet's own identity, as the Node authorizer and NodeRestriction expect it.
	client, err := cp.ClientCA.Issue(pki, "kubelet-client", CertSpec{
		CommonName: "system:node:" + n.Name, Organization: []string{"system:nodes"},
	})
	if err != nil {
		return err
	}
	if err := writeKubeconfig(filepath.Join(n.stateDir, "kubelet.kubeconfig"), cp.URL, cp.ServerCA.CertPEM, "system:node:"+n.Name, client); err != nil {
		return err
	}
	return writeFiles(n.stateDir, map[string]string{
		"containerd/config.toml":                      containerdConfig(n.stateDir, n.progs),
		"cni/net.d/10-metrics-ring-realnode.conflist": cniConfig(n.stateDir, bridgeName(n.index), podSubnet(n.index)),
		"kubelet/config.yaml":                         kubeletConfig(n, cp.ClientCA.CertFile, serving.CertFile, serving.KeyFile),
	})
}

// coverHostPaths creates the covered host folders that are missing, recording them so that the teardown
// removes them again (if still empty).
func coverHostPaths(stateDir string) error {
	var created []string
	for _, p := range hostPathsCovered {
		var missing []string
		for d := p; d != "/"; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); err == nil {
				break
			}
			missing = append([]string{d}, missing...)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", p, err)
		}
		created = append(created, missing...)
	}
	return os.WriteFile(filepath.Join(stateDir, dirsFile), []byte(strings.Join(created, "\n")+"\n"), 0o600)
}

func (n *RealNode) startContainerd(ctx context.Context) error {
	script := `for d in "$@"; do mount -t tmpfs -o mode=0755 ` + realNodePrefix + `tmpfs "$d"; done; exec ` +
		n.progs.Containerd + ` --config '` + filepath.Join(n.stateDir, "containerd", "config.toml") + `'`
	args := append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-ec", script, "sh"}, hostPathsCovered...)
	n.containerd = NewProcess(n.logDir, n.logName("containerd"), "/usr/bin/unshare", args...)
	fmt.Fprintf(n.out, "real node: starting containerd (state in %s)\n", n.stateDir)
	if err := n.containerd.Start(); err != nil {
		return err
	}
	return Poll(ctx, "containerd at "+containerdSocket(n.stateDir), 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, error) {
		if exited, err := n.containerd.Exited(); exited {
			return false, StopPolling(fmt.Errorf("containerd exited: %v; log: %s", err, n.containerd.LogFile))
		}
		out, err := exec.CommandContext(ctx, n.progs.Ctr, "-a", containerdSocket(n.stateDir), "version").CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("ctr version: %w: %s", err, tailLines(out, 3))
		}
		return true, nil
	})
}

// startKubelet starts the kubelet in containerd's mount namespace, so that what each mounts the other sees.
func (n *RealNode) startKubelet(ctx context.Context, cp *ControlPlane) error {
	pid := n.containerd.Pid()
	n.kubel = NewProcess(n.logDir, n.logName("kubelet"), "/usr/bin/nsenter",
		"--mount=/proc/"+strconv.Itoa(pid)+"/ns/mnt", "--", n.kubeletBin,
		"--config="+filepath.Join(n.stateDir, "kubelet", "config.yaml"),
		"--kubeconfig="+filepath.Join(n.stateDir, "kubelet.kubeconfig"),
		"--root-dir="+filepath.Join(n.stateDir, "kubelet"),
		"--cert-dir="+filepath.Join(n.stateDir, "kubelet", "pki"),
		"--node-ip="+n.IP, "--hostname-override="+n.Name, "-v=2")
	fmt.Fprintf(n.out, "real node: starting kubelet %s on %s:%d\n", n.Name, n.IP, n.Port)
	if err := n.kubel.Start(); err != nil {
		return err
	}
	return Poll(ctx, "node "+n.Name+" Ready", 500*time.Millisecond, 3*time.Minute, func(ctx context.Context) (bool, error) {
		if exited, err := n.kubel.Exited(); exited {
			return false, StopPolling(fmt.Errorf("kubelet exited: %v; last lines of %s:\n%s", err, n.kubel.LogFile, n.kubel.Tail(15)))
		}
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n.KubeletVersion = node.Status.NodeInfo.KubeletVersion
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status != corev1.ConditionTrue {
					//lint:ignore ST1005 Ready is the node condition's name
					return false, fmt.Errorf("Ready is %s: %s", c.Status, c.Message)
				}
				return true, nil
			}
		}
		return false, errors.New("no Ready condition yet")
	})
}

// DumpLogs writes the last lines of the kubelet's and containerd's logs to w.
func (n *RealNode) DumpLogs(w io.Writer, lines int) {
	for _, p := range []*Process{n.kubel, n.containerd} {
		if p != nil {
			p.DumpTail(w, lines)
		}
	}
}

// Stop stops the kubelet and containerd and removes everything the node made (see teardownRealNode); the
// nodes StartAnother started beside it first. A second Stop does nothing.
func (n *RealNode) Stop() {
	for i := len(n.others) - 1; i >= 0; i-- {
		n.others[i].Stop()
	}
	n.others = nil
	if n.kubel != nil {
		n.kubel.Stop(stopGrace)
	}
	if n.containerd != nil {
		n.containerd.Stop(stopGrace)
	}
	if n.stateDir != "" {
		teardownRealNode(n.stateDir, n.out)
		n.stateDir = ""
	}
	if n.unlock != nil {
		n.unlock()
		n.unlock = nil
	}
}
