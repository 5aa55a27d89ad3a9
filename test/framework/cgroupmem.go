package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WorkingSet is the memory working set of the cgroup whose cpuacct folder is cpuacctDir, read now from its memory
// hierarchy as the kubelet's cAdvisor counts it on cgroup v1: memory.usage_in_bytes less total_inactive_file
// (0 if that is more).
func WorkingSet(cpuacctDir string) (int64, error) {
	cpuMount, err := CPUAcctMount()
	if err != nil {
		return 0, err
	}
	memMount, err := controllerMount("memory")
	if err != nil {
		return 0, err
	}
	rel, err := filepath.Rel(cpuMount, cpuacctDir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return 0, fmt.Errorf("%s is not under %s", cpuacctDir, cpuMount)
	}
	dir := filepath.Join(memMount, rel)
	data, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return 0, fmt.Errorf("reading the memory cgroup: %w", err)
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/memory.usage_in_bytes: %w", dir, err)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, fmt.Errorf("reading the memory cgroup: %w", err)
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "total_inactive_file "); ok {
			inactive, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s/memory.stat: %w", dir, err)
			}
			return max(usage-inactive, 0), nil
		}
	}
	return 0, fmt.Errorf("%s/memory.stat has no total_inactive_file", dir)
}
