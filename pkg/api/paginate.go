package api

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
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

// paginate cuts items (sorted by key) to the page after the key `after`, at most limit long (0: no limit), and
// returns the continue token and how many items remain when there is a next page.
func paginate[T any](items []T, key func(*T) (namespace, name string), after string, limit int64, rv string) ([]T, string, *int64, error) {
	if after != "" {
		ans, aname, namespaced := strings.Cut(after, "/")
		if !namespaced {
			ans, aname = "", after
		}
		start := sort.Search(len(items), func(i int) bool {
			ns, name := key(&items[i])
			return ns > ans || (ns == ans && name > aname)
		})
		items = items[start:]
	}
	if limit <= 0 || int64(len(items)) <= limit {
		return items, "", nil, nil
	}
	gen, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return nil, "", nil, apierrors.NewBadRequest("limit is not supported by this storage")
	}
	ns, name := key(&items[limit-1])
	last := name
	if ns != "" {
		last = ns + "/" + name
	}
	token, err := apistorage.EncodeContinue("/"+last, "/", gen)
	if err != nil {
		return nil, "", nil, apierrors.NewInternalError(fmt.Errorf("encoding the continue token: %w", err))
	}
	remaining := int64(len(items)) - limit
	return items[:limit], token, &remaining, nil
}
