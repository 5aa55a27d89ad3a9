package api

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// metricsREST is the REST storage of one kind (nodeREST, podREST): list, page, get, watch and table, reading
// one snapshot per request. What differs between the kinds is kind.
type metricsREST[P any] struct {
	info    kindInfo
	run     string // names this server's resourceVersions (resourceversion.go)
	kind    kind[P]
	snaps   Snapshots
	now     func() metav1.Time
	builds  *buildCache[P]
	limit   *buildLimit
	answers *answerBudget
	watches *watchHub
	feeds   *watchFeeds[P]
	direct  *directLists // which encoders' lists are written directly from entries
}

var (
	_ rest.Storage              = &nodeREST{}
	_ rest.KindProvider         = &nodeREST{}
	_ rest.Scoper               = &nodeREST{}
	_ rest.Getter               = &nodeREST{}
	_ rest.Lister               = &nodeREST{}
	_ rest.Watcher              = &nodeREST{}
	_ rest.TableConvertor       = &nodeREST{}
	_ rest.SingularNameProvider = &nodeREST{}
	_ rest.Lister               = &podREST{}
)

// readers is what the REST storages of one server share, so their bounds hold for both kinds together: the run
// that names its resourceVersions, the watch bounds, the build slots, the budget of what builds keep and that of
// answers in flight.
type readers struct {
	run     string
	watches *watchHub
	limit   *buildLimit
	keeper  *keeper
	answers *answerBudget
}

// newReaders bounds the readers of one server as Deps says (zero values: the defaults).
func newReaders(d Deps) readers {
	r := readers{run: newRun(), watches: newWatchHub(d.MaxWatches, d.MaxWatchesPerUser),
		limit: newBuildLimit(d.MaxBuilds), keeper: newKeeper(d.ReaderCacheBytes), answers: newAnswerBudget(d.AnswerBytes)}
	r.answers.maxWaiting = r.limit.maxWaiting() // a user waits for room as many times as for slots
	return r
}

func newMetricsREST[P any](m Snapshots, k kind[P], r readers) *metricsREST[P] {
	s := &metricsREST[P]{info: k.info(), run: r.run, kind: k, snaps: m, now: metav1.Now, limit: r.limit,
		answers: r.answers, watches: r.watches, direct: newDirectLists()}
	s.builds = newBuildCache(s, r.keeper)
	s.feeds = newFeeds(s)
	return s
}

// New implements rest.Storage.
func (s *metricsREST[P]) New() runtime.Object { return s.info.newItem() }

// Destroy implements rest.Storage.
func (s *metricsREST[P]) Destroy() {}

// Kind implements rest.KindProvider.
func (s *metricsREST[P]) Kind() string { return s.info.kind }

// NamespaceScoped implements rest.Scoper.
func (s *metricsREST[P]) NamespaceScoped() bool { return s.info.namespaced }

// GetSingularName implements rest.SingularNameProvider.
func (s *metricsREST[P]) GetSingularName() string { return s.info.singular }

// NewList implements rest.Lister.
func (s *metricsREST[P]) NewList() runtime.Object { return s.info.newList() }

// List implements rest.Lister: every selected object with servable metrics, sorted by (namespace,) name, read from
// one snapshot whose generation is the list's resourceVersion; limit and continue page through that snapshot.
// Every list and page of one snapshot and selection shares one build (see build); answers nothing keeps are
// bounded in bytes while they are written (answerBudget).
func (s *metricsREST[P]) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	latest, sel, err := s.begin(opts)
	if err != nil {
		return nil, err
	}
	which := s.selection(ctx, sel)
	if essential, dropped := s.kind.essential(which.namespace, which.labels); dropped {
		which.given, which.labels = which.labels, essential
	}
	return s.listAnswer(ctx, latest, opts, which)
}

// selection is what a build is shared by: the request's namespace and selectors.
func (s *metricsREST[P]) selection(ctx context.Context, sel selectors) scope {
	ns := ""
	if s.info.namespaced {
		ns = genericapirequest.NamespaceValue(ctx)
	}
	return scope{namespace: ns, selectors: sel}
}

// Get implements rest.Getter: the object's metrics, or 404 when it does not exist or has none yet.
func (s *metricsREST[P]) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	snap := s.snaps.Latest()
	if err := unavailable(snap); err != nil {
		return nil, err
	}
	namespace := ""
	if s.info.namespaced {
		namespace = genericapirequest.NamespaceValue(ctx)
	}
	key := object{namespace: namespace, name: name}
	notFound := apierrors.NewNotFound(s.info.resource, key.key())
	obj, ok, err := s.kind.object(namespace, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound
	}
	p, ok := s.kind.point(snap, &obj)
	if !ok {
		return nil, notFound
	}
	now := s.now()
	observeFreshness(now.Time, pointTime(p))
	return s.kind.item(&entry[P]{object: obj, point: p}, s.rv(snap), now), nil
}

// Watch implements rest.Watcher: ADDED, MODIFIED and DELETED events as collections land (see startWatch).
func (s *metricsREST[P]) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	return s.startWatch(ctx, opts)
}

// begin starts a list or a watch: it loads the newest snapshot, the one whose health decides the 503 (and, for a
// list without continue, the one read), and parses the request's selectors.
func (s *metricsREST[P]) begin(opts *metainternalversion.ListOptions) (storage.Snapshot, selectors, error) {
	latest := s.snaps.Latest()
	if err := unavailable(latest); err != nil {
		return nil, selectors{}, err
	}
	sel, err := listSelectors(opts, s.info.namespaced)
	return latest, sel, err
}

// unavailable turns a snapshot's reason to refuse service into the 503 that `kubectl top` prints.
func unavailable(snap storage.Snapshot) error {
	if err := snap.Unavailable(); err != nil {
		return apierrors.NewServiceUnavailable(err.Error())
	}
	return nil
}
