package realnode

import (
	"path/filepath"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// containerCgroup finds the container's cpuacct cgroup under the node's cgroup root (the kubelet puts pods
// under kubepods/<qos>/pod<uid>, and runc each container in a child named by its ID).
func containerCgroup(containerID string) (string, error) {
	mount, err := framework.CPUAcctMount()
	if err != nil {
		return "", err
	}
	return framework.FindDir(filepath.Join(mount, env.node.CgroupRoot), containerID)
}
