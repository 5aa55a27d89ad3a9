// Package prometheus holds the end-to-end tests of metrics-ring's Prometheus source: a real Prometheus server
// (Debian's prometheus package, installed by the set-up when missing, run as our own process on loopback with
// its data under the test's temporary directory) scrapes the simulated kubelets' /metrics/resource and
// /metrics/cadvisor, as kube-prometheus does, and two metrics-ring backends run at once behind their own
// ExternalName Services, on their own loopback addresses and the same port: --source=kubelet
// (metrics-ring-kubelet) and --source=prometheus (metrics-ring-prometheus). The tests prove the Prometheus
// source's numbers against the simulator's truth and the kubelet source, that Prometheus' double scrape of
// cAdvisor is not counted twice, that `kubectl patch apiservice` swaps backends and back, and that an outage of
// either source (Prometheus stopped, every kubelet failing) shows in /metrics and the log at once, serves the
// last good data until --stale-after and then a 503 naming the source and its error, never a broken discovery
// or a silently empty answer.
package prometheus
