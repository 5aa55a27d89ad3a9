// Package api owns metrics-ring's metrics.k8s.io API, v1 and v1beta1 from the same storage: the REST storage for
// NodeMetrics (`nodes`) and PodMetrics (`pods`), one generic type with a small per-kind part, their Table form, and
// the k8s.io/apiserver GenericAPIServer that serves them with delegated authentication and authorization, OpenAPI,
// and the /readyz and /livez checks of DESIGN.md section 3.
//
// Readers' words, one meaning each: a holder (a user's requests, a page-through, a watch feed) holds what it uses so
// that it is kept: keeper.hold charges a user its share of a kept thing, Snapshots.Hold keeps a storage snapshot
// retained until the handle is released. A holder lets go (keeper.letGo; a build of the parts it shared: shed, each
// part's letGo) when it no longer uses it; a kept thing let go of for good is gone (nothing more is charged to it). A
// delivery (the events one collection brings a selection's watchers; storage's Batch is a source's samples) is
// referenced (ref) by each watcher that queued it and released once sent or dropped. Objects that no longer exist are
// deleted (a watch's DELETED events).
//
// Objects are listed from informers (nodes, and Running pods as metadata only) and their values read from storage;
// nothing here ever calls a source on the request path. Readers share work per snapshot (build.go): every list,
// page and watch of one collection and selection shares one build, and the builds running at once are bounded.
//
// A request's path, file by file: server.go installs the storage for both versions (scheme.go registers the types);
// rest.go loads one storage snapshot and takes from it both the 503 decision (storage's Unavailable) and the
// data, after selectors.go has parsed the selection; buildcache.go finds or makes the selection's build (bounded by
// buildlimit.go and buildwait.go, what it keeps by keep.go's budget in bytes, estimated by keepsize.go); build.go
// joins the informers' objects (kind.go) with that snapshot through the per-kind part in node.go or pod.go (pods
// through podindex.go's label index), sorted. Each part a build's readers share (shared.go) owns its lock and lets
// go of itself: fulllist.go the list of every entry, paginate.go the pages it cuts from the entries. An answer
// nothing keeps takes room in answers.go's budget until answerwrite.go's handler filter sees its response written;
// encodings.go and table.go encode it once per format (quantity.go writes CPU, memory and swap); watch.go starts a
// watch, watchfeed.go follows successive snapshots for a selection's watchers, watchdiff.go turns two builds into
// events, delivery.go carries them to every watcher, watchitem.go is each event's object (and a build's events),
// watcher.go sends them, watchhub.go bounds watches; removals.go keeps a build made before a deletion from later
// requests and watches. health.go serves /readyz and /livez, monitoring.go the API's self-metrics.
package api
