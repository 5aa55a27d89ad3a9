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
// nothing here ever calls a source on the request path. Readers share work per snapshot: every list, page and watch
// of one collection and selection shares one build, and the builds running at once are bounded.
//
// A request's path: it loads one storage snapshot and takes from it both the 503 decision (storage's Unavailable)
// and the data, so the two never disagree. It finds or makes the build of its selection in that snapshot: the
// informers' objects (pods through a label index) joined with the snapshot's values through the per-kind part,
// sorted. The builds running at once, how long a request waits for one (then 429) and the bytes that kept builds
// hold, charged to the users reading them, are bounded. Each part a build's readers share (the list of every entry,
// the pages a page-through cuts from it) owns its lock and lets go of itself; the snapshot of a page-through is held
// (a storage handle) while its lease runs. An answer nothing keeps takes room in a budget of answers in flight until
// its response is written, and each answer is encoded once per wire format. A watch joins its selection's feed,
// which follows successive snapshots, turns two builds into events and delivers them to each watcher; a watcher
// that falls behind is ended with 410 Gone. A build that lists an object deleted since it was made is kept from
// later requests and watches; one that lists none of the objects deleted since (storage names them) stays shared.
// /readyz and /livez ask the collection loop (Collection) and the informers' sync.
package api
