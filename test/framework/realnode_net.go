package framework

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The network links real nodes make on the host, all named with realNodeLinkPrefix so that the sweep finds what
// a killed run left and nothing else: node i's CNI bridge (bridgeName), the gateway of its pods' subnet
// (podSubnet), and for nodes after the first the link holding the node's own address (addressLinkName). The
// first node uses the host's address; the others get one each from 10.216.0.0/24, so that every node has an
// InternalIP of its own, as in a cluster.
const (
	realNodeLinkPrefix = "mrnode"
	// linksFile lists, in the node's state folder, the links its teardown deletes.
	linksFile = "links.owned"
)

func bridgeName(i int) string      { return fmt.Sprintf("%s%d", realNodeLinkPrefix, i) }
func addressLinkName(i int) string { return fmt.Sprintf("%s%dip", realNodeLinkPrefix, i) }

// podSubnet is node i's pod network: distinct subnets on distinct bridges, so that the host routes between the
// nodes' pods (and the aggregator to any of them) as between a cluster's nodes.
func podSubnet(i int) string { return fmt.Sprintf("10.217.%d.0/24", i) }

// extraNodeIP is the address of node i, for i of 1 and more.
func extraNodeIP(i int) string { return fmt.Sprintf("10.216.0.%d", i+1) }

// nodeIP is the first global IPv4 address of an interface that is up and not loopback.
func nodeIP() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing interfaces: %w", err)
	}
	for _, i := range ifaces {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 || strings.HasPrefix(i.Name, realNodeLinkPrefix) {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", fmt.Errorf("%w: no interface has a global IPv4 address (the kubelet needs a non-loopback --node-ip)", ErrNoRealNode)
}

// makeLinks records the links the node owns, then gives a node after the first its address: on a bridge with
// no port, which holds a local address as a dummy link would (this machine's kernel has no dummy links: "ip
// link add ... type dummy" says "Unknown device type"). The CNI plugin makes the node's bridge when its first
// pod starts.
func (n *RealNode) makeLinks() error {
	owned := []string{bridgeName(n.index)}
	if n.index > 0 {
		owned = append(owned, addressLinkName(n.index))
	}
	if err := os.WriteFile(filepath.Join(n.stateDir, linksFile), []byte(strings.Join(owned, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("recording the node's links: %w", err)
	}
	if n.index == 0 {
		return nil
	}
	link := addressLinkName(n.index)
	for _, args := range [][]string{
		{"link", "add", link, "type", "bridge"},
		{"address", "add", n.IP + "/32", "dev", link},
		{"link", "set", link, "up"},
	} {
		if o, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, o)
		}
	}
	return nil
}

// ownedLinks are the links the node whose state folder is dir recorded as its own.
func ownedLinks(dir string) []string {
	data, err := os.ReadFile(filepath.Join(dir, linksFile))
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}

// realNodeLinks are the host's links named as real nodes' are, whichever run made them.
func realNodeLinks() []string {
	ifaces, _ := net.Interfaces()
	var names []string
	for _, i := range ifaces {
		if strings.HasPrefix(i.Name, realNodeLinkPrefix) {
			names = append(names, i.Name)
		}
	}
	return names
}

// deleteLinks deletes each link that exists (a bridge's veths went with the pods' network namespaces).
func deleteLinks(names []string, out io.Writer) {
	for _, name := range names {
		if _, err := os.Stat(filepath.Join("/sys/class/net", name)); err != nil {
			continue
		}
		if o, err := exec.Command("ip", "link", "delete", name).CombinedOutput(); err != nil {
			fmt.Fprintf(out, "real node: ip link delete %s: %v: %s\n", name, err, o)
		}
	}
}
