package api

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// Pagination (limit and continue) reads every page from the snapshot the first page read: the continue token
// carries its resourceVersion, so the values of one paginated list come from one collection, and each page renews
// the lease of that snapshot's builds (buildLease), so a page-through costs about one build however many publications
// come between its pages. The first page reads the newest committed snapshot (storage's Committed), not the newest,
// and the build cache holds that snapshot (a storage handle) while the lease runs, so a build evicted meanwhile
// (keeper) can be made again from it. A token whose build and snapshot this replica does not keep (another replica's, see
// resourceversion.go, or one paged more slowly than the lease) continues after its key from the newest committed
// snapshot: every object once, no error, as DESIGN.md section 2 says. A page-through keeps its snapshot when an
// object is deleted meanwhile, so its later pages may still list it: they read its build, or, once a request since
// the deletion made that build again (build.stale), the new one, after the token's key.

// pageBuild returns the build a list reads and the key of the last item already returned ("" for a first page):
// latest's, the request's, for a list without limit; the newest committed snapshot's for a first page; the
// token's for a next page, while its build or its snapshot is kept, else the newest committed one's.
func (s *metricsREST[P]) pageBuild(ctx context.Context, latest storage.Snapshot, opts *metainternalversion.ListOptions, sel scope) (*build[P], string, error) {
	b, after, err := s.pageBuildOf(ctx, latest, opts, sel)
	if err == nil && sel.given != nil && !b.meets(sel.given) {
		// The essential selection's build lists an object the request's own selector excludes, by the labels it was
		// listed with (relabelled since, or given an excluded value since): the request's own selection is read.
		sel.labels, sel.given = sel.given, nil
		return s.pageBuildOf(ctx, latest, opts, sel)
	}
	return b, after, err
}

// pageBuildOf is pageBuild for the selection sel, as it is.
func (s *metricsREST[P]) pageBuildOf(ctx context.Context, latest storage.Snapshot, opts *metainternalversion.ListOptions, sel scope) (*build[P], string, error) {
	if opts != nil && opts.Continue != "" {
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return nil, "", apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		return s.continuePage(ctx, opts.Continue, sel)
	}
	snap, err := s.snapshotFor(latest, opts)
	if err != nil {
		return nil, "", err
	}
	b, err := s.builds.get(ctx, snap, sel)
	return b, "", err
}

// snapshotFor returns the snapshot a list without a continue token reads.
func (s *metricsREST[P]) snapshotFor(latest storage.Snapshot, opts *metainternalversion.ListOptions) (storage.Snapshot, error) {
	switch {
	case opts == nil:
		return latest, nil
	case opts.ResourceVersion != "" && opts.ResourceVersion != "0":
		return s.listVersion(latest, opts)
	case opts.Limit > 0:
		return s.snaps.Committed(), nil
	}
	return latest, nil
}

// listVersion returns the snapshot of a list with a resourceVersion, with Kubernetes' semantics: Exact (and, as
// kube-apiserver reads it, a legacy resourceVersion with limit) reads that snapshot or is 410 Gone; NotOlderThan
// (a legacy one without limit) reads the newest. Another run's version is never read as ours: Exact of it is 410
// Gone; NotOlderThan of it cannot be compared with ours and reads the newest, the freshest any replica has.
func (s *metricsREST[P]) listVersion(latest storage.Snapshot, opts *metainternalversion.ListOptions) (storage.Snapshot, error) {
	v, err := parseVersion(opts.ResourceVersion)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	ours := s.ours(v)
	if ours && v.gen > latest.Generation() {
		return nil, tooLarge(v, latest)
	}
	exact := opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact ||
		(opts.ResourceVersionMatch == "" && opts.Limit > 0)
	switch {
	case exact && !ours:
		return nil, notOurs(opts.ResourceVersion)
	case exact:
		snap, ok := s.snaps.Resolve(v.gen)
		if !ok {
			return nil, tooOld(v, latest)
		}
		return snap, nil
	case opts.Limit > 0:
		if c := s.snaps.Committed(); !ours || c.Generation() >= v.gen {
			return c, nil
		}
	}
	return latest, nil
}

// continuePage returns the build a continue token reads: its own while this replica keeps its build or its
// snapshot, else the newest committed snapshot's; and the key to continue after.
func (s *metricsREST[P]) continuePage(ctx context.Context, token string, sel scope) (*build[P], string, error) {
	rv, key, err := decodeContinue(token)
	if err == nil {
		err = s.validKey(key, sel.namespace)
	}
	if err != nil {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
	}
	reason := "foreign"
	if v, err := parseVersion(rv); err == nil && s.ours(v) {
		// Its snapshot first: a build kept by a lease renewed page after page must not outlive --stale-after.
		if snap, ok := s.snaps.Resolve(v.gen); ok {
			if b := s.builds.lookup(ctx, v.gen, sel); b != nil {
				return b, key, nil
			}
			b, err := s.builds.get(ctx, snap, sel)
			return b, key, err
		}
		reason = "expired"
	}
	pagesContinuedFromNewest.WithLabelValues(reason).Inc()
	b, err := s.builds.get(ctx, s.snaps.Committed(), sel)
	return b, key, err
}

// validKey checks a continue token's key: "namespace/name" for a namespaced kind, within the request's namespace
// (a token of an all-namespaces list used in one namespace would otherwise page from a wrong place), else a name.
func (s *metricsREST[P]) validKey(key, namespace string) error {
	ns, name, namespaced := strings.Cut(key, "/")
	switch {
	case namespaced != s.info.namespaced || strings.Contains(name, "/") || name == "" || (namespaced && ns == ""):
		return fmt.Errorf("%q is not a key of %s", key, s.info.resource.String())
	case namespace != "" && ns != namespace:
		return fmt.Errorf("the token is of namespace %q, not %q", ns, namespace)
	}
	return nil
}

// smallPage is the largest page built without a slot of buildLimit, and the largest shared.
const smallPage = 500

// page answers the page of b after the key `after`, at most limit long (0: no limit), from b's sorted entries: only
// the page's own items are built, so paging through N objects costs about one list, not N/limit lists. Clients
// paging through one collection together share each page, built and encoded once (pageCache).
func (s *metricsREST[P]) page(ctx context.Context, b *build[P], after string, limit int64) (runtime.Object, error) {
	start := 0
	if after != "" {
		var a object
		if ns, name, namespaced := strings.Cut(after, "/"); namespaced {
			a = object{namespace: ns, name: name}
		} else {
			a = object{name: after}
		}
		start = sort.Search(len(b.entries), func(i int) bool { return a.less(&b.entries[i].object) })
	}
	end := len(b.entries)
	if limit > 0 && int64(end-start) > limit {
		end = start + int(limit)
	}
	cut := func() (runtime.Object, error) { return s.cut(b, start, end) }
	switch {
	case end-start > smallPage:
		return s.alone(ctx, b.entries[start:end], true, cut)
	case end == start || !b.shared: // an empty page is the handler's to fill in; a build not kept
		return s.alone(ctx, b.entries[start:end], false, cut)
	}
	size := func() int64 { return listBytes(b.entries[start:end]) }
	return b.pages.get(s.builds.keeper, &b.keep, start, end, size, func(p *shared) (runtime.Object, error) {
		if p == nil { // not kept: the request's alone
			return s.alone(ctx, b.entries[start:end], false, cut)
		}
		list, err := s.cut(b, start, end)
		if err != nil {
			return list, err
		}
		return s.builds.chargeEncodings(b, s.kind.shared(list), p), nil
	})
}

// cut builds the list of b's entries [start, end) with the continue token of the rest.
func (s *metricsREST[P]) cut(b *build[P], start, end int) (runtime.Object, error) {
	es := b.entries[start:end]
	var token string
	var remaining *int64
	if end < len(b.entries) {
		var err error
		if token, err = encodeContinue(b.rv, es[len(es)-1].key()); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("encoding the continue token: %w", err))
		}
		n := int64(len(b.entries) - end)
		remaining = &n
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

// maxSharedPageItems bounds the items of the pages of a build kept for clients paging through it together (the
// newest pages): clients paging in step share every page.
const maxSharedPageItems = 4096

// pageCache is the pages of a build kept for clients paging through it together: the newest, up to
// maxSharedPageItems items. Once let go of (letGo: a newer collection landed, or the build was evicted), it keeps no
// more.
type pageCache struct {
	mu      sync.Mutex
	byRange map[[2]int]*shared // by [start, end) of the build's entries
	order   [][2]int           // pages, oldest first
	items   int                // in the pages
	old     bool               // let go of: pages are no longer kept
}

// letGo lets go of the pages: requests that still have them encode them uncharged.
func (c *pageCache) letGo() {
	c.mu.Lock()
	for _, p := range c.byRange {
		p.letGo()
	}
	c.byRange, c.order, c.items, c.old = nil, nil, 0, true
	c.mu.Unlock()
}

// get returns the page of entries [start, end), made by makePage for the first request that asks: makePage gets
// the page it makes, or nil when the page is not kept (the keeper had no room for its size, charged to k, or the
// pages were let go of). Older pages are let go of, refunded to k, to keep the newest within maxSharedPageItems.
func (c *pageCache) get(kp *keeper, k *kept, start, end int, size func() int64, makePage func(*shared) (runtime.Object, error)) (runtime.Object, error) {
	key := [2]int{start, end}
	c.mu.Lock()
	p := c.byRange[key]
	if p == nil && !c.old {
		if c.byRange == nil {
			c.byRange = map[[2]int]*shared{}
		}
		for c.items+end-start > maxSharedPageItems && len(c.order) > 0 {
			old := c.order[0]
			kp.refund(k, c.byRange[old].letGo())
			delete(c.byRange, old)
			c.items -= old[1] - old[0]
			c.order = c.order[1:]
		}
		if n := size(); kp.admit(k, n) {
			p = &shared{bytes: n}
			c.byRange[key] = p
			c.order = append(c.order, key)
			c.items += end - start
		}
	}
	c.mu.Unlock()
	if p == nil {
		return makePage(nil)
	}
	p.once.Do(func() { p.obj, p.err = makePage(p) })
	return p.obj, p.err
}
