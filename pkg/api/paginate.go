package api

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	apistorage "k8s.io/apiserver/pkg/storage"
)

// Pagination (limit and continue) reads every page from the snapshot the first page read: the continue token
// carries its generation, so the values of one paginated list come from one collection. A token whose snapshot is no
// longer retained (a list paged more slowly than storage.RetainedViews collections) is 410 Gone, as Kubernetes
// answers an expired continue token; the client lists again from the start.

// snapshotFor returns the snapshot a list reads, its resourceVersion, and the key of the last item already
// returned ("" for a first page).
func snapshotFor(m MetricsReader, opts *metainternalversion.ListOptions) (points, string, string, error) {
	if opts == nil || opts.Continue == "" {
		snap, rv := latest(m)
		return snap, rv, "", nil
	}
	v, ok := m.(Versioned)
	if !ok {
		return nil, "", "", apierrors.NewBadRequest("continue is not supported by this storage")
	}
	after, gen, err := apistorage.DecodeContinue(opts.Continue, "/")
	if err != nil || gen <= 0 {
		return nil, "", "", apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
	}
	snap, ok := v.At(uint64(gen))
	if !ok {
		return nil, "", "", apierrors.NewResourceExpired(fmt.Sprintf(
			"the continue token's collection %d is no longer retained (the newest is %d): list again without continue",
			gen, v.Latest().Generation()))
	}
	return snap, strconv.FormatInt(gen, 10), strings.TrimPrefix(after, "/"), nil
}

// smallPage is the largest page built without a slot of buildLimit: its cost is that of the request itself.
const smallPage = 500

// page builds the page of b after the key `after`, at most limit long (0: no limit), from b's sorted entries: only
// the page's own items are built, so paging through N objects costs about one list, not N/limit lists.
func (s *metricsREST[P]) page(ctx context.Context, b *build[P], after string, limit int64) (runtime.Object, error) {
	es := b.entries
	if after != "" {
		var a object
		if ns, name, namespaced := strings.Cut(after, "/"); namespaced {
			a = object{namespace: ns, name: name}
		} else {
			a = object{name: after}
		}
		es = es[sort.Search(len(es), func(i int) bool { return a.less(&es[i].object) }):]
	}
	var token string
	var remaining *int64
	if limit > 0 && int64(len(es)) > limit {
		gen, err := strconv.ParseInt(b.rv, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest("limit is not supported by this storage")
		}
		if token, err = apistorage.EncodeContinue("/"+es[limit-1].key(), "/", gen); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("encoding the continue token: %w", err))
		}
		n := int64(len(es)) - limit
		remaining, es = &n, es[:limit]
	}
	if len(es) > smallPage {
		release, err := s.limit.acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	list := s.kind.list(es, b.rv, b.created)
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	lm.SetContinue(token)
	lm.SetRemainingItemCount(remaining)
	return list, nil
}
