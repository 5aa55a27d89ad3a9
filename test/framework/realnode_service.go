package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serviceRuleComment marks the NAT rule RouteKubernetesService adds for the node whose state folder is dir, so
// that its teardown finds it and nothing else (not the rule of another node still running), and the sweep after
// a killed run finds it by realNodePrefix.
func serviceRuleComment(dir string) string { return filepath.Base(dir) + "-kubernetes-service" }

// RouteKubernetesService makes the kubernetes Service's address lead to kube-apiserver for the node's pods (its
// in-cluster clients, metrics-ring's among them, dial KUBERNETES_SERVICE_HOST): one DNAT rule in place of
// kube-proxy, which would serve every Service but change far more of the host (and this cluster has no other
// Service pods dial: the aggregator reaches APIServices' pods directly). The node's Stop removes the rule.
func (n *RealNode) RouteKubernetesService(ctx context.Context, cp *ControlPlane) error {
	svc, err := cp.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the kubernetes Service: %w", err)
	}
	if len(svc.Spec.Ports) == 0 {
		return fmt.Errorf("the kubernetes Service has no port")
	}
	u, err := url.Parse(cp.URL)
	if err != nil {
		return fmt.Errorf("kube-apiserver's address %q: %w", cp.URL, err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || ip.IsLoopback() {
		return fmt.Errorf("kube-apiserver listens on %s, which pods cannot reach (want a control plane with Options.NodeAddress)", u.Host)
	}
	return addServiceRule(ctx, serviceRuleComment(n.stateDir), svc.Spec.ClusterIP, svc.Spec.Ports[0].Port, u.Host)
}

// addServiceRule adds the NAT rule that leads clusterIP:port to dest, marked with comment.
func addServiceRule(ctx context.Context, comment, clusterIP string, port int32, dest string) error {
	args := []string{"-w", "-t", "nat", "-A", "PREROUTING", "-d", clusterIP + "/32", "-p", "tcp",
		"--dport", fmt.Sprint(port), "-m", "comment", "--comment", comment, "-j", "DNAT", "--to-destination", dest}
	if o, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, o)
	}
	return nil
}

// removeServiceRules deletes the NAT rules RouteKubernetesService added whose comment holds mark: one node's
// (serviceRuleComment), or every run's (realNodePrefix).
func removeServiceRules(mark string, out io.Writer) {
	if _, err := exec.LookPath("iptables"); err != nil {
		return
	}
	rules, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "PREROUTING").Output()
	if err != nil {
		return
	}
	for _, rule := range strings.Split(string(rules), "\n") {
		f := strings.Fields(rule)
		if len(f) < 2 || f[0] != "-A" || !strings.Contains(rule, mark) {
			continue
		}
		f[0] = "-D"
		if o, err := exec.Command("iptables", append([]string{"-w", "-t", "nat"}, f...)...).CombinedOutput(); err != nil {
			fmt.Fprintf(out, "real node: iptables -t nat %s: %v: %s\n", strings.Join(f, " "), err, o)
		}
	}
}
