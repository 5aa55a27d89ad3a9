package api

import (
	"bytes"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/metrics/pkg/apis/metrics"
)

// What a snapshot's build shares is encoded once per wire format (JSON, protobuf, YAML, Table...) and the bytes
// copied to every request: a list of every pod of a large cluster is megabytes of JSON, and encoding it costs far
// more than building it (BENCHMARKS.md, "Figures behind the comments"). The apiserver encodes through runtime.CacheableObject, the interface its watch cache
// uses to share encodings between watchers: pages here (sharedNodeList, sharedPodList), full lists (leanList, which
// keeps its encodings and not its items) and each object of a watch event (watchItem) implement it.

// encodings caches one object's encodings, one per encoder identifier. A slice, not a map: an object sees one or
// two encoders, and a watch has one of these per object.
type encodings struct {
	mu   sync.Mutex
	byID []*encoded
	// charge, when set before the first encoding, is told the bytes of each encoding kept (keeper.charge).
	charge func(n int)
}

type encoded struct {
	id   runtime.Identifier
	once sync.Once
	data []byte
	err  error
}

// cacheEncode writes the encoding of obj() for id, encoding it on first use. obj is called only to encode, so an
// object that is only ever served from its encodings is never kept built. encode must get an object of its own or
// one nobody modifies: the versioning codec sets and restores TypeMeta while it encodes, so callers that pass a
// shared object serialize through lock.
func (e *encodings) cacheEncode(obj func() runtime.Object, lock sync.Locker, id runtime.Identifier,
	encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	e.mu.Lock()
	var enc *encoded
	for _, c := range e.byID {
		if c.id == id {
			enc = c
			break
		}
	}
	if enc == nil {
		enc = &encoded{id: id}
		e.byID = append(e.byID, enc)
	}
	e.mu.Unlock()
	enc.once.Do(func() {
		if lock != nil {
			lock.Lock()
			defer lock.Unlock()
		}
		var buf bytes.Buffer
		enc.err = encode(obj(), &buf)
		// An exact-size copy: the buffer grew by doubling, and the bytes are kept as long as the build.
		enc.data = bytes.Clone(buf.Bytes())
		if e.charge != nil {
			e.charge(len(enc.data))
		}
	})
	if enc.err != nil {
		return enc.err
	}
	// One Write: the protobuf watch framer frames each Write as one event.
	_, err := w.Write(enc.data)
	return err
}

// sharedNodeList is a NodeMetricsList shared between requests; it embeds the list, so everything that reads a list
// (tables, metadata-only lists, audit) reads it as one. The list is never modified once shared (conversion to
// v1beta1 copies), so the encoder gets it itself rather than a deep copy.
type sharedNodeList struct {
	*metrics.NodeMetricsList
	enc      encodings
	encoding sync.Mutex
}

// CacheEncode implements runtime.CacheableObject.
func (l *sharedNodeList) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	return l.enc.cacheEncode(func() runtime.Object { return l.NodeMetricsList }, &l.encoding, id, encode, w)
}

func (l *sharedNodeList) encodingsOf() *encodings { return &l.enc }

// GetObject implements runtime.CacheableObject.
func (l *sharedNodeList) GetObject() runtime.Object { return l.NodeMetricsList.DeepCopyObject() }

// sharedPodList is sharedNodeList for pods.
type sharedPodList struct {
	*metrics.PodMetricsList
	enc      encodings
	encoding sync.Mutex
}

// CacheEncode implements runtime.CacheableObject.
func (l *sharedPodList) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	return l.enc.cacheEncode(func() runtime.Object { return l.PodMetricsList }, &l.encoding, id, encode, w)
}

func (l *sharedPodList) encodingsOf() *encodings { return &l.enc }

// GetObject implements runtime.CacheableObject.
func (l *sharedPodList) GetObject() runtime.Object { return l.PodMetricsList.DeepCopyObject() }

var (
	_ runtime.CacheableObject = &sharedNodeList{}
	_ runtime.CacheableObject = &sharedPodList{}
)
