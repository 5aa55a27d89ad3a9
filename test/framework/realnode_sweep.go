package framework

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// teardownRealNode removes what the node whose state folder is dir made, whether it stopped or its run was
// killed: the processes naming the folder (kubelet, containerd, the shims containerd started in sessions of
// their own), the pods' processes and cgroups under its cgroup root, its links (realnode_net.go), the kubernetes
// Service's NAT rule if it added it (RouteKubernetesService), mounts seen from here, the
// kernel tunables and iptables chains the kubelet changed, the host folders made to mount over, and the
// folder. The mounts and network namespaces in the node's mount namespace end with its last process.
func teardownRealNode(dir string, out io.Writer) {
	// dir+"/": another node's folder may begin with dir's name (metrics-ring-realnode-12, -123).
	for i := 0; i < 50 && killByCmdline(dir+"/") > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	removeCgroups(filepath.Base(dir), out)
	deleteLinks(ownedLinks(dir), out)
	removeServiceRules(serviceRuleComment(dir), out)
	unmountUnder(dir)
	restoreHostState(dir, out)
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(out, "real node: removing %s: %v\n", dir, err)
	}
}

// SweepRealNodes removes what real nodes of earlier runs left on this machine (a run killed before its
// teardown): their state folders and all they name, and any cgroup, link or NAT rule carrying the nodes' names.
// StartRealNode calls it under the machine's real node lock.
func SweepRealNodes(out io.Writer) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), realNodePrefix+"*"))
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			fmt.Fprintf(out, "real node: removing what an earlier run left in %s\n", d)
			teardownRealNode(d, out)
		}
	}
	killByCmdline(filepath.Join(os.TempDir(), realNodePrefix))
	removeCgroups(realNodePrefix+"*", out)
	deleteLinks(realNodeLinks(), out)
	removeServiceRules(realNodePrefix, out)
}
