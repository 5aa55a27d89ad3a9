// Package deploy holds the end-to-end tests of what an operator installs: the kustomize overlays and the
// checked-in release YAMLs are accepted by a real kube-apiserver (server-side dry run), the objects it would
// store keep the overlays' promises (secure defaults, probes, priority, the APIService -> Service ->
// Deployment route, high availability) and a pod of each is admitted under the restricted Pod Security
// Standard; the release YAMLs stay in sync with `make manifests`; the base RBAC is enough for metrics-ring
// running as its ServiceAccount; and two replicas of the kubelet source each serve complete answers, so the
// APIService survives losing one (high availability). One local control plane per package (TestMain),
// simulated kubelets, assertions through the built kubectl and client-go.
package deploy
