package scraper

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
)

// AnnotationResourceMetricsPath overrides a node's resource metrics path, as in metrics-server.
const AnnotationResourceMetricsPath = "metrics.k8s.io/resource-metrics-path"

const defaultMetricsPath = "/metrics/resource"

// nodeAddress returns the node's first address of the first preferred type that it has.
func nodeAddress(node *corev1.Node, preferred []corev1.NodeAddressType) (string, error) {
	for _, t := range preferred {
		for _, a := range node.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address, nil
			}
		}
	}
	have := make([]string, 0, len(node.Status.Addresses))
	for _, a := range node.Status.Addresses {
		have = append(have, string(a.Type))
	}
	return "", fmt.Errorf("node %q has no address of the preferred types %v (it has %v)", node.Name, preferred, have)
}

// target is where a node's kubelet serves resource metrics: url to request, and shown for errors. A path from the
// node's annotation is text anyone who can annotate a Node chooses, and errors become the 503 text every namespace
// reader gets (DESIGN.md section 3), so shown says only that the path came from the annotation; the log line has it.
type target struct {
	url, shown string
	closeAfter bool // the connection is closed after this request (connage.go)
}

// annotatedPath stands for the path annotation's value in errors.
const annotatedPath = "/<path from annotation " + AnnotationResourceMetricsPath + ">"

// nodeURL is where the node's kubelet serves resource metrics.
func nodeURL(node *corev1.Node, o *Options) (target, error) {
	addr, err := nodeAddress(node, o.PreferredAddressTypes)
	if err != nil {
		return target{}, err
	}
	port := o.Port
	if p := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port); o.UseNodeStatusPort && p != 0 {
		port = p
	}
	u := url.URL{Scheme: o.Scheme, Host: net.JoinHostPort(addr, strconv.Itoa(port)), Path: defaultMetricsPath}
	p := node.Annotations[AnnotationResourceMetricsPath]
	if p == "" {
		return target{url: u.String(), shown: u.String()}, nil
	}
	if err := checkMetricsPath(p); err != nil {
		// The reason is a class (too long, not absolute, a host, a query, a character, a dot segment): the value
		// itself goes to the log only, where klog quotes and escapes it.
		return target{}, logonly.Wrap(fmt.Errorf("node %q: annotation %s refused: %w", node.Name,
			AnnotationResourceMetricsPath, err), "annotation", truncate(p, maxPathBytes))
	}
	u.Path = ""
	base := u.String()
	u.Path = p
	return target{url: u.String(), shown: base + annotatedPath}, nil
}

// maxPathBytes bounds the path annotation, and how much of a refused one an error quotes.
const maxPathBytes = 256

// checkMetricsPath accepts an absolute path of plain URL path characters with no "." or ".." segment. The node's
// address is the only host our credentials go to: a path cannot name another (//host), add a query or a fragment,
// or climb out of the kubelet's metrics endpoints through a proxy that cleans paths after checking them.
func checkMetricsPath(p string) error {
	switch {
	case len(p) > maxPathBytes:
		return fmt.Errorf("longer than %d bytes", maxPathBytes)
	case !strings.HasPrefix(p, "/"):
		return errors.New("not an absolute path (a scheme and host, or a relative path, are not accepted)")
	case strings.HasPrefix(p, "//"):
		return errors.New("names a host")
	case strings.ContainsAny(p, "?#"):
		return errors.New("has a query or fragment")
	}
	for _, c := range p {
		if !pathChar(c) {
			return fmt.Errorf("character %q is not allowed", c)
		}
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("has a %q segment", seg)
		}
	}
	return nil
}

// pathChar is RFC 3986's pchar and "/", without percent-encoding: letters, digits and -._~!$&'()*+,;=:@/.
func pathChar(c rune) bool {
	return c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.ContainsRune("-._~!$&'()*+,;=:@/", c))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
