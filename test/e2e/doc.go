// Package e2e holds metrics-ring's end-to-end tests: one local control plane per package (TestMain), simulated
// kubelets, metrics-ring behind the v1 and v1beta1.metrics.k8s.io APIServices, and assertions made the way users and
// controllers see the API: through the built kubectl and through client-go via kube-apiserver's aggregator.
package e2e
