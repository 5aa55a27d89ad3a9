package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/metrics/pkg/apis/metrics"
)

// Lists are built once per collection and shared: the first request for a given namespace and selectors after a
// collection lands builds the list and, per wire format, encodes it; later requests for the same collection get
// the same list and copy the encoded bytes. A list of every pod of a 1,000-node cluster is about 10 MB of JSON,
// and encoding it costs far more than building it, so dashboards, `kubectl top -A` and load balancers polling
// together cost one encoding per collection instead of one per request.
//
// The apiserver encodes through runtime.CacheableObject, the interface its watch cache uses to share encodings
// between watchers. Which objects exist is as the informers saw them when the list was built, at most one
// collection ago. Paged lists (limit, continue) are not shared.

// maxCachedLists bounds the lists kept per resource for the newest collection. HPAs ask for their own namespace
// and selector once per sync, so they rarely repeat within one collection; what repeats is a handful of wide lists.
const maxCachedLists = 8

// listCache holds the shared lists of the newest collection, keyed by namespace and selectors.
type listCache[L runtime.Object] struct {
	mu      sync.Mutex
	rv      string // the collection the entries were built from
	entries map[string]*listEntry[L]
}

// listEntry is one shared list, or the build of it in progress: done is closed when list and err are set.
type listEntry[L runtime.Object] struct {
	done chan struct{}
	list L
	err  error
}

// get returns the list for key at collection rv, building it with build when it is not shared yet. Concurrent
// requests for the same list wait for one build rather than each building their own: when a collection lands
// under load, hundreds of clients ask at once, and a list of every pod costs tens of megabytes to build.
//
// changed, when not nil, is closed once a newer collection is published: the lists are then dropped, so a list of
// every pod (tens of megabytes with its encodings) is not kept alive through the quiet time until the next request.
func (c *listCache[L]) get(ctx context.Context, rv, key string, changed <-chan struct{}, build func() (L, error)) (L, error) {
	c.mu.Lock()
	if c.rv != rv {
		c.rv, c.entries = rv, map[string]*listEntry[L]{}
		if changed != nil {
			go c.dropOn(changed, rv)
		}
	}
	e, ok := c.entries[key]
	if !ok && len(c.entries) < maxCachedLists {
		e = &listEntry[L]{done: make(chan struct{})}
		c.entries[key] = e
	}
	c.mu.Unlock()
	if e == nil { // the cache is full for this collection: this list is built for this request alone
		return build()
	}
	if ok {
		select {
		case <-e.done:
			return e.list, e.err
		case <-ctx.Done():
			var zero L
			return zero, ctx.Err()
		}
	}
	defer func() {
		if r := recover(); r != nil {
			e.err = fmt.Errorf("building the list panicked: %v", r)
			defer panic(r) // this request fails as any panicking request does; the waiters get the error
		}
		if e.err != nil {
			// An error (an informer that failed, say) is not kept: the next request tries again.
			c.mu.Lock()
			if c.rv == rv && c.entries[key] == e {
				delete(c.entries, key)
			}
			c.mu.Unlock()
		}
		close(e.done)
	}()
	e.list, e.err = build()
	return e.list, e.err
}

// dropOn forgets the lists of collection rv when changed is closed, unless a newer collection replaced them first.
func (c *listCache[L]) dropOn(changed <-chan struct{}, rv string) {
	<-changed
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rv == rv {
		c.rv, c.entries = "", nil
	}
}

// changedOf is the channel closed when a snapshot newer than snap is published, or nil for storage without snapshots.
func changedOf(snap points) <-chan struct{} {
	if s, ok := snap.(interface{ Changed() <-chan struct{} }); ok {
		return s.Changed()
	}
	return nil
}

// encodings caches one list's encoding per encoder (JSON, protobuf, YAML, pretty JSON).
type encodings struct {
	mu   sync.Mutex
	byID map[runtime.Identifier]*encoded
	// encoding serializes encoders: the versioning codec sets and restores the list's TypeMeta while it encodes.
	encoding sync.Mutex
}

type encoded struct {
	once sync.Once
	data []byte
	err  error
}

func (e *encodings) cacheEncode(obj runtime.Object, id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	e.mu.Lock()
	if e.byID == nil {
		e.byID = map[runtime.Identifier]*encoded{}
	}
	enc, ok := e.byID[id]
	if !ok {
		enc = &encoded{}
		e.byID[id] = enc
	}
	e.mu.Unlock()
	enc.once.Do(func() {
		e.encoding.Lock()
		defer e.encoding.Unlock()
		var buf bytes.Buffer
		// The list is never modified once shared (conversion to v1beta1 copies), so the encoder gets it itself
		// rather than a deep copy.
		enc.err = encode(obj, &buf)
		// An exact-size copy: the buffer grew by doubling, and a list of every pod is kept for a whole collection.
		enc.data = bytes.Clone(buf.Bytes())
	})
	if enc.err != nil {
		return enc.err
	}
	_, err := w.Write(enc.data)
	return err
}

// sharedNodeList is a NodeMetricsList shared between requests; it embeds the list, so everything that reads a list
// (tables, metadata-only lists, audit) reads it as one.
type sharedNodeList struct {
	*metrics.NodeMetricsList
	enc encodings
}

// CacheEncode implements runtime.CacheableObject.
func (l *sharedNodeList) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	return l.enc.cacheEncode(l.NodeMetricsList, id, encode, w)
}

// GetObject implements runtime.CacheableObject.
func (l *sharedNodeList) GetObject() runtime.Object { return l.NodeMetricsList.DeepCopyObject() }

// sharedPodList is sharedNodeList for pods.
type sharedPodList struct {
	*metrics.PodMetricsList
	enc encodings
}

// CacheEncode implements runtime.CacheableObject.
func (l *sharedPodList) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	return l.enc.cacheEncode(l.PodMetricsList, id, encode, w)
}

// GetObject implements runtime.CacheableObject.
func (l *sharedPodList) GetObject() runtime.Object { return l.PodMetricsList.DeepCopyObject() }

var (
	_ runtime.CacheableObject = &sharedNodeList{}
	_ runtime.CacheableObject = &sharedPodList{}
)
