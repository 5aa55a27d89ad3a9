package scraper

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

func TestNodeAddress(t *testing.T) {
	addrs := []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "node-a"},
		{Type: corev1.NodeExternalIP, Address: ""}, // empty: skipped
		{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
		{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
	}
	for _, tc := range []struct {
		name      string
		preferred []corev1.NodeAddressType
		want      string
	}{
		{"default order", defaultAddressTypes, "10.0.0.1"},
		{"external first", []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP}, "203.0.113.1"},
		{"hostname only", []corev1.NodeAddressType{corev1.NodeHostName}, "node-a"},
		{"none of the types", []corev1.NodeAddressType{corev1.NodeInternalDNS}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
			n.Status.Addresses = addrs
			got, err := nodeAddress(n, tc.preferred)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), `node "node-a" has no address`) {
					t.Fatalf("want an error naming the node, got %q %v", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}

func TestNodeEndpoint(t *testing.T) {
	srv := kubelet(t, nil)
	custom := kubelet(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/custom/resource" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(readFixture(t, "metrics-resource-30pods.txt"))
	})
	statusPort := nodeFor(t, "n", srv).Status.DaemonEndpoints.KubeletEndpoint.Port
	for _, tc := range []struct {
		name string
		o    Options
		node func(*corev1.Node)
		srv  bool // use custom instead of srv
		want string
	}{
		{name: "node status port", o: Options{Port: 1, UseNodeStatusPort: true}},
		{name: "--kubelet-port", o: Options{Port: int(statusPort)}, node: func(n *corev1.Node) {
			n.Status.DaemonEndpoints.KubeletEndpoint.Port = 1
		}},
		{name: "status port ignored without the flag", o: Options{Port: 1}, want: "127.0.0.1:1"},
		{name: "address preference", o: Options{UseNodeStatusPort: true,
			PreferredAddressTypes: []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP}},
			node: func(n *corev1.Node) {
				n.Status.Addresses = []corev1.NodeAddress{
					{Type: corev1.NodeInternalIP, Address: "127.0.0.2"}, {Type: corev1.NodeExternalIP, Address: "127.0.0.1"}}
			}},
		{name: "default preference is InternalIP", o: Options{UseNodeStatusPort: true},
			node: func(n *corev1.Node) {
				n.Status.Addresses = []corev1.NodeAddress{
					{Type: corev1.NodeExternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeInternalIP, Address: "127.0.0.2"}}
			}, want: "127.0.0.2"},
		{name: "path annotation", o: Options{UseNodeStatusPort: true}, srv: true, node: func(n *corev1.Node) {
			n.Annotations = map[string]string{AnnotationResourceMetricsPath: "/custom/resource"}
		}},
		{name: "default path", o: Options{UseNodeStatusPort: true}, srv: true, want: "status 404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := srv
			if tc.srv {
				s = custom
			}
			n := nodeFor(t, "n", s)
			if tc.node != nil {
				tc.node(n)
			}
			tc.o.InsecureTLS = true
			store := newFakeStore()
			cycle(t, tc.o, store, n)
			end := store.lastEnd(t)
			if tc.want == "" && (!end.success || len(store.batches["n"].Containers) != 60) {
				t.Fatalf("want 60 containers stored, got %d: %v", len(store.batches["n"].Containers), end.err)
			}
			if tc.want != "" && (end.success || end.err == nil || !strings.Contains(end.err.Error(), tc.want)) {
				t.Fatalf("want a failure mentioning %q, got %v %v", tc.want, end.success, end.err)
			}
		})
	}
}

// The 503 text never carries text a node's annotation chose (DESIGN.md section 3): not a refused path, and not an
// accepted one whose scrape fails. It says the node and the cause class.
func TestAnnotationIsNotIn503(t *testing.T) {
	const words = "call-mallory-at-example.com"
	notFound := func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }
	notMetrics := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello\n")) }
	for _, tc := range []struct {
		name, path string
		handler    http.HandlerFunc
		want       string
	}{
		{"refused", "/../" + words, notFound, `annotation metrics.k8s.io/resource-metrics-path refused: has a ".." segment`},
		{"refused, too long", "/" + words + strings.Repeat("a", maxPathBytes), notFound, "refused: longer than 256 bytes"},
		{"accepted, status 404", "/" + words, notFound, "<path from annotation metrics.k8s.io/resource-metrics-path>: status 404"},
		{"accepted, not metrics", "/" + words, notMetrics, "no usable samples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := nodeFor(t, "n1", kubelet(t, tc.handler))
			n.Annotations = map[string]string{AnnotationResourceMetricsPath: tc.path}
			store := storage.New(storage.Options{Source: "kubelet"})
			s, err := newScraper(Options{InsecureTLS: true, UseNodeStatusPort: true}, &fakeLister{nodes: []*corev1.Node{n}}, stored{store})
			if err != nil {
				t.Fatal(err)
			}
			s.collect(context.Background())
			err = store.Latest().Unavailable()
			if err == nil || !strings.Contains(err.Error(), `node "n1"`) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("503 text %v: want the node and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), words) {
				t.Errorf("503 text %q carries the annotation's text", err)
			}
		})
	}
}
