package api

import (
	"context"
	"fmt"
	"maps"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// NodeStorage is the REST storage of metrics.k8s.io/v1beta1 `nodes` (NodeMetrics, cluster-scoped).
type NodeStorage struct {
	metrics      MetricsReader
	nodes        NodeLister
	nodeSelector labels.Requirements
	now          func() metav1.Time
	watches      *watchHub
	lists        listCache[*sharedNodeList]
}

var (
	_ rest.Storage              = &NodeStorage{}
	_ rest.KindProvider         = &NodeStorage{}
	_ rest.Scoper               = &NodeStorage{}
	_ rest.Getter               = &NodeStorage{}
	_ rest.Lister               = &NodeStorage{}
	_ rest.Watcher              = &NodeStorage{}
	_ rest.TableConvertor       = &NodeStorage{}
	_ rest.SingularNameProvider = &NodeStorage{}
)

// NewNodeStorage serves the nodes of lister that have metrics in m. nodeSelector (--node-selector) restricts the
// nodes served to those scraped, as metrics-server does; nil means all.
func NewNodeStorage(m MetricsReader, lister NodeLister, nodeSelector labels.Requirements) *NodeStorage {
	return &NodeStorage{metrics: m, nodes: lister, nodeSelector: nodeSelector, now: metav1.Now, watches: newWatchHub(0)}
}

// New implements rest.Storage.
func (s *NodeStorage) New() runtime.Object { return &metrics.NodeMetrics{} }

// Destroy implements rest.Storage.
func (s *NodeStorage) Destroy() {}

// Kind implements rest.KindProvider.
func (s *NodeStorage) Kind() string { return "NodeMetrics" }

// NamespaceScoped implements rest.Scoper.
func (s *NodeStorage) NamespaceScoped() bool { return false }

// GetSingularName implements rest.SingularNameProvider.
func (s *NodeStorage) GetSingularName() string { return "nodemetrics" }

// NewList implements rest.Lister.
func (s *NodeStorage) NewList() runtime.Object { return &metrics.NodeMetricsList{} }

// List implements rest.Lister: every selected node with servable metrics, sorted by name, read from one snapshot
// whose generation is the list's resourceVersion; limit and continue page through that snapshot.
func (s *NodeStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	if err := unavailable(s.metrics); err != nil {
		return nil, err
	}
	snap, rv, after, err := snapshotFor(s.metrics, opts)
	if err != nil {
		return nil, err
	}
	var limit int64
	if opts != nil {
		limit = opts.Limit
	}
	now := s.now().Time
	if rv != "" && after == "" && limit <= 0 {
		shared, err := s.lists.get(ctx, rv, selectorKey(opts), changedOf(snap), func() (*sharedNodeList, error) {
			list, err := s.list(opts, snap, rv)
			if err != nil {
				return nil, err
			}
			// Observed once per shared list, not per request: under load, 30,000 observations per request of
			// one histogram cost more CPU than serving the shared bytes.
			for i := range list.Items {
				observeFreshness(now, list.Items[i].Timestamp.Time)
			}
			return &sharedNodeList{NodeMetricsList: list}, nil
		})
		if err != nil {
			return nil, err
		}
		if len(shared.Items) == 0 {
			// The handler sets an empty list's items in place; an empty list is cheap, so each request gets its own.
			return &metrics.NodeMetricsList{ListMeta: shared.ListMeta, Items: []metrics.NodeMetrics{}}, nil
		}
		return shared, nil
	}
	list, err := s.list(opts, snap, rv)
	if err != nil {
		return nil, err
	}
	list.Items, list.Continue, list.RemainingItemCount, err = paginate(list.Items, nodeKey, after, limit, rv)
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		observeFreshness(now, list.Items[i].Timestamp.Time)
	}
	return list, nil
}

func nodeKey(m *metrics.NodeMetrics) (string, string) { return "", m.Name }

func (s *NodeStorage) list(opts *metainternalversion.ListOptions, snap points, rv string) (*metrics.NodeMetricsList, error) {
	sel, err := listSelectors(opts, false)
	if err != nil {
		return nil, err
	}
	labelSel := sel.labels
	if len(s.nodeSelector) > 0 {
		labelSel = labelSel.Add(s.nodeSelector...)
	}
	nodes, err := s.nodes.List(labelSel)
	if err != nil {
		klog.ErrorS(err, "Failed listing nodes", "labelSelector", labelSel.String())
		return nil, apierrors.NewInternalError(fmt.Errorf("listing nodes: %w", err))
	}
	now := s.now()
	list := &metrics.NodeMetricsList{Items: make([]metrics.NodeMetrics, 0, len(nodes))}
	list.ResourceVersion = rv
	for _, n := range nodes {
		if !sel.matchFields("", n.Name) {
			continue
		}
		if m, ok := s.nodeMetrics(snap, rv, n.Name, n.Labels, now); ok {
			list.Items = append(list.Items, m)
		}
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list, nil
}

// Get implements rest.Getter: the node's metrics, or 404 when the node does not exist or has none yet.
func (s *NodeStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	if err := unavailable(s.metrics); err != nil {
		return nil, err
	}
	node, err := s.nodes.Get(name)
	if apierrors.IsNotFound(err) || (err == nil && node == nil) {
		return nil, apierrors.NewNotFound(nodeResource, name)
	}
	if err != nil {
		klog.ErrorS(err, "Failed getting node", "node", klog.KRef("", name))
		return nil, apierrors.NewInternalError(fmt.Errorf("getting node %q: %w", name, err))
	}
	snap, rv := latest(s.metrics)
	now := s.now()
	m, ok := s.nodeMetrics(snap, rv, node.Name, node.Labels, now)
	if !ok {
		return nil, apierrors.NewNotFound(nodeResource, name)
	}
	observeFreshness(now.Time, m.Timestamp.Time)
	return &m, nil
}

func (s *NodeStorage) nodeMetrics(snap points, rv, name string, lbls map[string]string, now metav1.Time) (metrics.NodeMetrics, bool) {
	p, ok := snap.Node(name)
	if !ok {
		return metrics.NodeMetrics{}, false
	}
	return metrics.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls, CreationTimestamp: now, ResourceVersion: rv},
		Timestamp:  metav1.NewTime(p.Timestamp),
		Window:     metav1.Duration{Duration: p.Window},
		Usage:      resourceList(p.Usage),
	}, true
}

// unavailable turns storage's reason to refuse service into the 503 that `kubectl top` prints.
func unavailable(m MetricsReader) error {
	if err := m.Unavailable(); err != nil {
		return apierrors.NewServiceUnavailable(err.Error())
	}
	return nil
}

// Watch implements rest.Watcher: ADDED, MODIFIED and DELETED events as collections land (see startWatch).
func (s *NodeStorage) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	sel, err := listSelectors(opts, false)
	if err != nil {
		return nil, err
	}
	return startWatch(ctx, s.watches, s.metrics, watchKind{
		resource: nodeResource,
		list: func(snap points, rv string) (map[string]runtime.Object, error) {
			list, err := s.list(opts, snap, rv)
			if err != nil {
				return nil, err
			}
			objs := make(map[string]runtime.Object, len(list.Items))
			for i := range list.Items {
				objs[list.Items[i].Name] = &list.Items[i]
			}
			return objs, nil
		},
		gone: func(snap storage.Snapshot) []string {
			var keys []string
			snap.Each(func(name string) {
				if sel.matchFields("", name) {
					if n, err := s.nodes.Get(name); apierrors.IsNotFound(err) || (err == nil && n == nil) {
						keys = append(keys, name)
					}
				}
			}, nil)
			return keys
		},
		same: func(a, b runtime.Object) bool {
			x, y := a.(*metrics.NodeMetrics), b.(*metrics.NodeMetrics)
			return x.Timestamp.Equal(&y.Timestamp) && x.Window == y.Window && maps.Equal(x.Labels, y.Labels) &&
				sameUsage(x.Usage, y.Usage)
		},
		empty: func(key, rv string) runtime.Object {
			return &metrics.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: key, ResourceVersion: rv}}
		},
	}, opts)
}
