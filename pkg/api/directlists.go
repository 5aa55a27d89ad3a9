package api

import (
	"bytes"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// directLists decides, per encoder, whether a list's compact JSON or protobuf is written directly from its entries
// (itemjson.go, itemproto.go) or made by the encoder: an encoder the apiserver names by an identifier has its lists
// written directly once its first list with items, made by it, is byte for byte the one written directly; an
// encoder whose list differs, or that writes another format (pretty JSON, YAML), keeps making its lists. The
// comparison is made once per encoder and per process, on whatever that first list holds: what guards every
// other input (escapes, invalid UTF-8, extreme values) is TestItemsAsTheEncoders and the fuzzers, to run again
// whenever the Kubernetes modules change. What the encoder alone knows, the list's envelope (kind, apiVersion,
// metadata), is its own encoding of the empty list, kept for the last resourceVersion asked.
type directLists struct {
	mu   sync.Mutex
	byID map[runtime.Identifier]*encoderVerdict
}

// encoderVerdict is what was learned of one encoder.
type encoderVerdict struct {
	checked, direct bool     // compared on a list with items; its lists are written directly
	rv              string   // the resourceVersion env was made for
	env             envelope // the encoder's empty list, in parts
}

// maxEncoders bounds the encoders directLists remembers: the apiserver has about a dozen (a format, pretty or not,
// strict or not, at a version), and a request cannot make more; beyond it, lists are made by their encoder.
const maxEncoders = 64

func newDirectLists() *directLists {
	return &directLists{byID: map[runtime.Identifier]*encoderVerdict{}}
}

// verdict returns what is known of id's encoder (a copy), and whether it may be remembered.
func (j *directLists) verdict(id runtime.Identifier) (encoderVerdict, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	v, ok := j.byID[id]
	if !ok {
		return encoderVerdict{}, len(j.byID) < maxEncoders
	}
	return *v, true
}

// learn records what id's encoder was found to do, and the envelope made for rv.
func (j *directLists) learn(id runtime.Identifier, v encoderVerdict) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.byID[id]; !ok && len(j.byID) >= maxEncoders {
		return
	}
	j.byID[id] = &v
}

// directList is id's encoding of the list of es. direct says it was written directly from the entries; without
// data, the encoder must make it (neither compact JSON nor protobuf, found to differ, not yet compared on a list
// with items, one identifier too many, or an item that could not be written). An encoder's first list with
// items is both written directly and made by the encoder, the two compared, and the encoder's returned.
func directList[P any](j *directLists, k kind[P], es []entry[P], rv string, created metav1.Time,
	id runtime.Identifier, encode encodeFunc) (data listEncoding, direct bool, err error) {
	v, known := j.verdict(id)
	if !known || (v.checked && !v.direct) || (!v.checked && len(es) == 0) {
		return listEncoding{}, false, nil
	}
	env := v.env
	if v.rv != rv {
		e, ok, err := envelopeOf(k, rv, created, encode)
		if err != nil {
			return listEncoding{}, false, err
		}
		if !ok {
			j.learn(id, encoderVerdict{checked: true})
			return listEncoding{}, false, nil
		}
		env = e
	}
	var written listEncoding
	var ok bool
	if env.proto {
		written, ok = writeProtoList(k, env, es, rv, created)
	} else {
		written, ok = writeList(k, env.head, es, rv, created)
	}
	if !ok {
		written.done()
		return listEncoding{}, false, nil
	}
	if v.checked {
		if v.rv != rv {
			j.learn(id, encoderVerdict{checked: true, direct: true, rv: rv, env: env})
		}
		return written, true, nil
	}
	encoded, err := encodeByEncoder(k, es, rv, created, encode)
	if err != nil {
		written.done()
		return listEncoding{}, false, err
	}
	same := bytes.Equal(written.data, encoded)
	written.done()
	if !same {
		klog.InfoS("Lists for this encoder are made by it: its encoding differs from the one written directly",
			"resource", k.info().resource.String(), "encoder", string(id))
	}
	j.learn(id, encoderVerdict{checked: true, direct: same, rv: rv, env: env})
	return listEncoding{data: encoded}, false, nil
}

// writeList writes the compact JSON list of es whose envelope up to its items is head; ok is false when an item
// could not be written. It begins in a pooled buffer, lent with the list when it fits; a list longer than
// sampleItems gets a buffer of its own, sized from its first items (extrapolated) within twice the answer budget's
// estimate of its JSON (jsonBytes), and grown only as the items need.
func writeList[P any](k kind[P], head []byte, es []entry[P], rv string, created metav1.Time) (_ listEncoding, ok bool) {
	s := newItemScratch()
	pooled := listBuffers.Get().(*[]byte)
	b := append((*pooled)[:0], head...)
	for i := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = k.appendJSON(b, &es[i], rv, created, s)
		if i+1 == sampleItems && len(es) > sampleItems {
			estimate := len(head) + int(jsonBytes(es)) + len(jsonListTail)
			if need := len(head) + extrapolated(len(b)-len(head), i+1, len(es), estimate); need > cap(b) {
				b = append(make([]byte, 0, need), b...)
			}
		}
	}
	b = append(b, jsonListTail...)
	if cap(b) > pooledListBytes {
		listBuffers.Put(pooled)
		return listEncoding{data: trimmed(b)}, !s.failed
	}
	return listEncoding{data: b, buf: b, pooled: pooled}, !s.failed
}

// sampleItems is how many items a list's size is extrapolated from.
const sampleItems = 64

// extrapolated is the size of a list of total items of which done took written bytes, with a sixteenth to spare,
// at most twice estimate: a user's bulky labels on the first pods (they sort first by their name) cannot make
// a list allocate more than that beforehand, only grow as it is written.
func extrapolated(written, done, total, estimate int) int {
	return min(written/done*total*17/16, 2*estimate)
}

// pooledListBytes is the largest list written in a pooled buffer: an HPA's selection is a few kilobytes, and a
// pool of buffers the size of every pod's list would keep megabytes for nothing.
const pooledListBytes = 256 << 10

var listBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// listEncoding is a list's encoding. When pooled is set, data lies in buf, a buffer of listBuffers lent to the caller:
// it gives the buffer back with done once data is written, or copies data out with kept. Who holds a listEncoding
// owns its buffer: writeList and writeProtoList lend it, directList and encodeList pass it on (or give it back when
// the list is made otherwise), and leanList either writes it to its first reader and gives it back after the one
// Write (an io.Writer keeps nothing of what it is given) or keeps a copy (leanList.encode).
type listEncoding struct {
	data, buf []byte
	pooled    *[]byte
}

// lent reports whether l's bytes are in a buffer of listBuffers.
func (l *listEncoding) lent() bool { return l.pooled != nil }

// done gives l's buffer back, if lent; l's bytes are not to be read after.
func (l *listEncoding) done() {
	if l.pooled == nil {
		return
	}
	*l.pooled = l.buf[:0]
	listBuffers.Put(l.pooled)
	l.pooled, l.buf, l.data = nil, nil, nil
}

// kept is l's bytes to keep: a copy at their size when lent, l's buffer given back.
func (l *listEncoding) kept() []byte {
	if l.pooled == nil {
		return l.data
	}
	data := bytes.Clone(l.data)
	l.done()
	return data
}

// envelope is what the encoder alone knows of a list, from its encoding of the empty list: for compact JSON, its
// head up to the items' opening bracket; for protobuf (proto), the Unknown's fields before the list (head), the
// empty list itself (its ListMeta field) and the fields after it (tail).
type envelope struct {
	proto                bool
	head, listMeta, tail []byte
}

// envelopeOf is the envelope of encode's encoding of the empty list at rv; ok is false when it is neither compact
// JSON nor Kubernetes' protobuf.
func envelopeOf[P any](k kind[P], rv string, created metav1.Time,
	encode encodeFunc) (env envelope, ok bool, err error) {
	var buf bytes.Buffer
	if err := encode(k.list(nil, rv, created), &buf); err != nil {
		return envelope{}, false, err
	}
	b := buf.Bytes()
	if len(b) > 0 && b[0] == '{' && bytes.HasSuffix(b, []byte(`"items":[]}`+"\n")) {
		return envelope{head: bytes.Clone(b[:len(b)-len("]}\n")])}, true, nil
	}
	env, ok = protoEnvelope(b)
	return env, ok, nil
}
