// Package realnode holds the end-to-end tests on a real node: the kubelet built from the pinned
// k8s.io/kubernetes, Debian's containerd and runc and the CNI bridge plugin on this machine
// (framework.StartRealNode), running pods of images built here from Go, scraped by metrics-ring behind the
// aggregator beside one simulated node, with upstream metrics-server v0.9.0 scraping the same kubelet for
// comparison. They check what a simulator cannot: CPU against the cgroups' own counters over the kubelet's
// windows (and metrics-server's), memory against the kubelet's working set, init containers, sidecars,
// restarts, deletions and re-creations as a real kubelet reports them, and the real HPA scaling real pods. Where no real
// node can start (not root, not Linux, no apt-get to install what is missing) the tests skip saying why;
// under CI=true they fail instead.
package realnode
