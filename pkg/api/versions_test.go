package api

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/metrics/pkg/apis/metrics"
	metricsv1 "k8s.io/metrics/pkg/apis/metrics/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// versionClient reads one version of metrics.k8s.io with its own typed clientset, as that version's clients do
// (kubectl 1.37 v1, the HPA v1beta1), and converts each answer to the internal types, so that one test asserts the
// same answer of every version. The typed clients refuse an answer of another version than theirs.
type versionClient struct {
	version    string
	nodes      func(ctx context.Context, opts metav1.ListOptions) (*metrics.NodeMetricsList, error)
	node       func(ctx context.Context, name string) (*metrics.NodeMetrics, error)
	pods       func(ctx context.Context, ns string, opts metav1.ListOptions) (*metrics.PodMetricsList, error)
	pod        func(ctx context.Context, ns, name string) (*metrics.PodMetrics, error)
	watchNodes func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// versionClients returns a client of every served version, v1 first, in JSON or protobuf.
func (ts *testServer) versionClients(t *testing.T, protobuf bool) []versionClient {
	t.Helper()
	cs := ts.metricsClient(t, protobuf)
	v1, v1beta1 := cs.MetricsV1(), cs.MetricsV1beta1()
	clients := []versionClient{
		clientOf("v1", v1.NodeMetricses(), func(ns string) typedClient[*metricsv1.PodMetricsList, *metricsv1.PodMetrics] {
			return v1.PodMetricses(ns)
		}),
		clientOf("v1beta1", v1beta1.NodeMetricses(), func(ns string) typedClient[*metricsv1beta1.PodMetricsList, *metricsv1beta1.PodMetrics] {
			return v1beta1.PodMetricses(ns)
		}),
	}
	if len(clients) != len(servedVersions) {
		t.Fatalf("a client for each of %v", servedVersions)
	}
	return clients
}

// typedClient is what the typed clientset of every version has for one resource.
type typedClient[L, O runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (O, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

func clientOf[NL, N, PL, P runtime.Object](version string, nodes typedClient[NL, N], pods func(ns string) typedClient[PL, P]) versionClient {
	return versionClient{
		version: version,
		nodes: func(ctx context.Context, o metav1.ListOptions) (*metrics.NodeMetricsList, error) {
			return internal[metrics.NodeMetricsList](nodes.List(ctx, o))
		},
		node: func(ctx context.Context, name string) (*metrics.NodeMetrics, error) {
			return internal[metrics.NodeMetrics](nodes.Get(ctx, name, metav1.GetOptions{}))
		},
		pods: func(ctx context.Context, ns string, o metav1.ListOptions) (*metrics.PodMetricsList, error) {
			return internal[metrics.PodMetricsList](pods(ns).List(ctx, o))
		},
		pod: func(ctx context.Context, ns, name string) (*metrics.PodMetrics, error) {
			return internal[metrics.PodMetrics](pods(ns).Get(ctx, name, metav1.GetOptions{}))
		},
		watchNodes: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return internalWatch(nodes.Watch(ctx, o))
		},
	}
}

// internal converts what a versioned client got to the internal type; the client's error is kept as it is.
func internal[T any, PT interface {
	*T
	runtime.Object
}](obj runtime.Object, err error) (PT, error) {
	if err != nil {
		return nil, err
	}
	out := PT(new(T))
	if err := scheme.Convert(obj, out, nil); err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	return out, nil
}

// internalWatch converts a versioned watch's objects to the internal types; an object that does not convert is
// passed on as it is, for the test to fail on.
func internalWatch(w watch.Interface, err error) (watch.Interface, error) {
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if obj, err := scheme.ConvertToVersion(ev.Object, runtime.InternalGroupVersioner); err == nil {
			ev.Object = obj
		}
		return ev, true
	}), nil
}
