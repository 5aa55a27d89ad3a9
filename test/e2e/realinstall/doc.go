// Package realinstall installs metrics-ring for real: the Helm chart (tls.type=helm) and the kubelet overlay, each
// running as a pod of the image `make image-archive` builds, on a real node (framework.StartRealNode: the kubelet
// built from the pinned module, Debian's containerd and runc) with kube-scheduler and kube-controller-manager,
// behind kube-apiserver's aggregator dialing the pod through its Service's endpoints (and, with the chart,
// verifying its certificate against the caBundle the chart wrote). It checks what a user would: the pod runs and is Ready, both APIServices are Available, `kubectl
// top` shows the node's truth (its cgroups), a `rollout restart` fails no `kubectl top` and ends watches as
// DESIGN.md section 2 says; and it runs metrics-server v0.9.0's own end-to-end suite, unchanged, against the
// chart. The high-availability overlay runs on two real nodes (a second started beside the first for that test):
// one replica per node, pages of a list continuing across them, a `kubectl drain` failing no `kubectl top`. Pods
// reach kube-apiserver through the kubernetes Service by one NAT rule (no kube-proxy). Where no real
// node can start the tests skip saying why; under CI=true they fail instead.
package realinstall
