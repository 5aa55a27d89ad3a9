package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// containerdConfig is containerd 1.6's configuration with every path it writes under dir, the sandbox image
// set to ours, and restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so runc cannot lower a
// process's oom_score_adj below its parent's and every sandbox fails with "can't get final child's PID from
// pipe" otherwise.
func containerdConfig(dir string, progs NodePrograms) string {
	q := strconv.Quote
	return strings.Join([]string{
		`version = 2`,
		`root = ` + q(filepath.Join(dir, "containerd", "root")),
		`state = ` + q(filepath.Join(dir, "containerd", "state")),
		`disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]`,
		`[grpc]`,
		`  address = ` + q(containerdSocket(dir)),
		`[ttrpc]`,
		`  address = ` + q(filepath.Join(dir, "containerd", "ttrpc.sock")),
		`[plugins."io.containerd.internal.v1.opt"]`,
		`  path = ` + q(filepath.Join(dir, "containerd", "opt")),
		`[plugins."io.containerd.grpc.v1.cri"]`,
		`  sandbox_image = ` + q(FullImageName(PauseImage)),
		`  restrict_oom_score_adj = true`,
		`  disable_apparmor = true`,
		`  enable_selinux = false`,
		`  [plugins."io.containerd.grpc.v1.cri".containerd]`,
		`    snapshotter = "overlayfs"`,
		`    default_runtime_name = "runc"`,
		`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`,
		`      runtime_type = "io.containerd.runc.v2"`,
		`      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`,
		`        BinaryName = ` + q(progs.Runc),
		`        Root = ` + q(filepath.Join(dir, "runc")),
		`        SystemdCgroup = false`,
		`  [plugins."io.containerd.grpc.v1.cri".cni]`,
		`    bin_dir = ` + q(progs.CNIBinDir),
		`    conf_dir = ` + q(filepath.Join(dir, "cni", "net.d")),
		``,
	}, "\n")
}

func containerdSocket(dir string) string { return filepath.Join(dir, "containerd", "containerd.sock") }

// cniConfig is the pod network of a real node: a bridge with the subnet's gateway address, the pods' default
// route, so that pods reach the nodes' addresses (the kubelets, kube-apiserver behind the kubernetes Service)
// and other nodes' pods, and the aggregator reaches pods; without masquerading (so it adds no iptables rule):
// pods talk to this host only. As a gateway the bridge plugin sets ip_forward, put back with the kubelet's
// tunables when the first node stops. Its address bookkeeping is under dir.
func cniConfig(dir, bridge, subnet string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "metrics-ring-realnode",
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true, "isDefaultGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q}
  }]
}
`, bridge, subnet, filepath.Join(dir, "cni", "ipam"))
}

// kubeletConfig is the KubeletConfiguration for this machine: cgroup v1 through cgroupfs under cgroupRoot,
// oomScoreAdj 0 (no CAP_SYS_RESOURCE to lower it), x509 and webhook authentication and webhook
// authorization as in a cluster, every path under dir, and eviction thresholds low enough that a shared
// machine's disk never evicts the tests' pods.
func kubeletConfig(n *RealNode, clientCA, cert, key string) string {
	q := strconv.Quote
	return strings.Join([]string{
		`apiVersion: kubelet.config.k8s.io/v1beta1`,
		`kind: KubeletConfiguration`,
		`failCgroupV1: false`,
		`cgroupDriver: cgroupfs`,
		`cgroupRoot: ` + q("/"+n.CgroupRoot),
		`cgroupsPerQOS: true`,
		`oomScoreAdj: 0`,
		`address: ` + q(n.IP),
		`port: ` + strconv.Itoa(n.Port),
		`readOnlyPort: 0`,
		`healthzBindAddress: 127.0.0.1`,
		`healthzPort: ` + strconv.Itoa(n.healthzPort),
		`tlsCertFile: ` + q(cert),
		`tlsPrivateKeyFile: ` + q(key),
		`authentication:`,
		`  anonymous: {enabled: false}`,
		`  webhook: {enabled: true}`,
		`  x509: {clientCAFile: ` + q(clientCA) + `}`,
		`authorization: {mode: Webhook}`,
		`containerRuntimeEndpoint: ` + q("unix://"+containerdSocket(n.stateDir)),
		`podLogsDir: ` + q(filepath.Join(n.stateDir, "pod-logs")),
		`failSwapOn: false`,
		`protectKernelDefaults: false`,
		`registerNode: true`,
		`serializeImagePulls: false`,
		`imageGCHighThresholdPercent: 100`,
		`imageGCLowThresholdPercent: 99`,
		`evictionHard: {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"}`,
		`nodeStatusReportFrequency: 10s`,
		`syncFrequency: 10s`,
		`fileCheckFrequency: 10s`,
		`shutdownGracePeriod: 0s`,
		``,
	}, "\n")
}

// writeFiles writes each name under dir, creating folders.
func writeFiles(dir string, files map[string]string) error {
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return nil
}
