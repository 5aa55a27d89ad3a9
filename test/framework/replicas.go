package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"
	"k8s.io/utils/ptr"
)

// Replicas behind one Service, as the high-availability overlay runs them: kube-apiserver with
// --enable-aggregator-routing=true resolves the APIService's Service to its endpoints and picks one at random for
// every request. Endpoints cannot be loopback addresses (kube-apiserver's validation refuses 127.0.0.0/8 and
// link-local ones), and the endpoints of one EndpointSlice share its port; so the replicas listen on this machine's
// non-loopback address, each on its own free port, and each gets its own EndpointSlice, of the Service's one port
// name. The aggregator looks at a Service's slices in a random order, and so reaches either replica.

// RunOf is the part of a metrics-ring resourceVersion that names the replica and run that made it. Clients treat
// resourceVersions as opaque; tests read metrics-ring's own format to tell which replica answered.
func RunOf(rv string) string {
	_, run, _ := strings.Cut(rv, "-")
	return run
}

// NonLoopbackIP returns an IPv4 address of this machine that Endpoints accept (global unicast), for replicas.
func NonLoopbackIP() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("listing this machine's addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("this machine has no non-loopback IPv4 address for replicas' endpoints")
}

// ServeReplicas creates service as a ClusterIP Service without a selector whose endpoints are the replicas (one
// EndpointSlice each, Ready), points the APIServices at it and waits up to timeout until they are Available.
func (m *MetricsAPI) ServeReplicas(ctx context.Context, service string, replicas []*Backend, timeout time.Duration) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: service, Namespace: m.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "metrics-ring"}},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(m.Port)}},
		},
	}
	if _, err := m.cp.Client.CoreV1().Services(m.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Service %s/%s: %w", m.Namespace, service, err)
	}
	for _, r := range replicas {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: r.Replica, Namespace: m.Namespace, Labels: map[string]string{
				discoveryv1.LabelServiceName: service,
				discoveryv1.LabelManagedBy:   "metrics-ring-e2e",
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{r.IP},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(r.Port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		if _, err := m.cp.Client.DiscoveryV1().EndpointSlices(m.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating EndpointSlice %s/%s for %s: %w", m.Namespace, r.Replica, r.URL(), err)
		}
	}
	if err := m.PointAPIService(ctx, service); err != nil {
		return err
	}
	return m.WaitAvailable(ctx, nil, timeout)
}

// PodPager is what PagePods lists through: a client-go PodMetricsInterface of v1.
type PodPager interface {
	List(ctx context.Context, opts metav1.ListOptions) (*metricsv1.PodMetricsList, error)
}

// PagePods lists every pod's metrics by pages of limit, each page continuing the one before, and returns the pods
// in the order listed ("namespace/name"), the pages it took, and how many of them another replica answered than the
// page before (RunOf). It fails after maxPages pages: a continue token that never ends.
func PagePods(ctx context.Context, pods PodPager, limit int64, maxPages int) (names []string, pages, crossed int, err error) {
	opts := metav1.ListOptions{Limit: limit}
	run := ""
	for {
		l, err := pods.List(ctx, opts)
		if err != nil {
			return names, pages, crossed, fmt.Errorf("page %d: %w", pages, err)
		}
		pages++
		for _, p := range l.Items {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		if r := RunOf(l.ResourceVersion); run != "" && r != run {
			crossed++
		}
		run = RunOf(l.ResourceVersion)
		if l.Continue == "" {
			return names, pages, crossed, nil
		}
		if pages > maxPages {
			return names, pages, crossed, fmt.Errorf("more than %d pages", maxPages)
		}
		opts.Continue = l.Continue
	}
}
