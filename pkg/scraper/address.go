package scraper

import (
	"fmt"
	"net"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
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

// nodeURL is where the node's kubelet serves resource metrics.
func nodeURL(node *corev1.Node, o *Options) (string, error) {
	addr, err := nodeAddress(node, o.PreferredAddressTypes)
	if err != nil {
		return "", err
	}
	port := o.Port
	if p := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port); o.UseNodeStatusPort && p != 0 {
		port = p
	}
	path := defaultMetricsPath
	if p := node.Annotations[AnnotationResourceMetricsPath]; p != "" {
		path = p
	}
	u := url.URL{Scheme: o.Scheme, Host: net.JoinHostPort(addr, strconv.Itoa(port)), Path: path}
	return u.String(), nil
}
