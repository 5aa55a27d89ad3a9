package api

import (
	"bytes"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// jsonLists decides, per encoder, whether a list is written from its entries (itemjson.go) or encoded by the
// encoder: an encoder the apiserver names by an identifier is written for once its first list, encoded by it, is
// byte for byte the one written; an encoder whose list differs, or is not compact JSON, keeps encoding its lists.
// What the encoder alone knows, the list's envelope (kind, apiVersion, metadata), is its own encoding of the empty
// list, kept per resourceVersion.
type jsonLists struct {
	mu   sync.Mutex
	byID map[runtime.Identifier]*jsonEncoder
}

// jsonEncoder is what is known of one encoder.
type jsonEncoder struct {
	checked, writes bool
	rv              string // the resourceVersion head was made for
	head            []byte // the empty list's encoding up to its items
}

// maxJSONEncoders bounds what jsonLists remembers: the apiserver has a handful of encoders (a format, pretty or
// not, at a version), so more means identifiers it makes per request, which get the encoder's own encoding.
const maxJSONEncoders = 64

func newJSONLists() *jsonLists { return &jsonLists{byID: map[runtime.Identifier]*jsonEncoder{}} }

// encoder returns what is known of id's encoder (a copy), and whether it may be remembered.
func (j *jsonLists) encoder(id runtime.Identifier) (jsonEncoder, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.byID[id]
	if !ok {
		return jsonEncoder{}, len(j.byID) < maxJSONEncoders
	}
	return *e, true
}

// learn records what id's encoder was found to do, and the head made for rv.
func (j *jsonLists) learn(id runtime.Identifier, e jsonEncoder) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.byID[id]; !ok && len(j.byID) >= maxJSONEncoders {
		return
	}
	j.byID[id] = &e
}

// writtenList is the list of es written from the entries (written), when id's encoder is known to write those
// bytes. Nothing is returned when the encoder must encode it: not compact JSON, found to differ, not yet compared on
// a list with items, or one identifier too many. The first list with items of an encoder is both written and
// encoded, the two compared, and the encoder's own encoding returned (encoded).
func writtenList[P any](j *jsonLists, k kind[P], es []entry[P], rv string, created metav1.Time,
	id runtime.Identifier, encode encodeFunc) (encoded, written []byte, err error) {
	e, known := j.encoder(id)
	if !known || (e.checked && !e.writes) || (!e.checked && len(es) == 0) {
		return nil, nil, nil
	}
	head := e.head
	if e.rv != rv {
		h, isJSON, err := jsonHead(k, rv, created, encode)
		if err != nil {
			return nil, nil, err
		}
		if !isJSON {
			j.learn(id, jsonEncoder{checked: true})
			return nil, nil, nil
		}
		head = h
	}
	written = writeList(k, head, es, rv, created)
	if e.checked {
		if e.rv != rv {
			j.learn(id, jsonEncoder{checked: true, writes: true, rv: rv, head: head})
		}
		return nil, written, nil
	}
	if encoded, err = encodeByEncoder(k, es, rv, created, encode); err != nil {
		return nil, nil, err
	}
	writes := bytes.Equal(written, encoded)
	if !writes {
		klog.InfoS("Lists for this encoder are encoded by it: its JSON differs from the written one",
			"resource", k.info().resource.String(), "encoder", string(id))
	}
	j.learn(id, jsonEncoder{checked: true, writes: writes, rv: rv, head: head})
	return encoded, nil, nil
}

// writeList writes the compact JSON list of es whose envelope up to its items is head. A list of up to
// pooledListBytes is written in a buffer kept for the next and copied out at its size (one allocation); a larger
// one in a buffer sized from its first item.
func writeList[P any](k kind[P], head []byte, es []entry[P], rv string, created metav1.Time) []byte {
	var s jsonScratch
	pooled := listBuffers.Get().(*[]byte)
	b := append((*pooled)[:0], head...)
	for i := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = k.appendJSON(b, &es[i], rv, created, &s)
		if i == 0 && len(es) > 1 {
			if guess := len(head) + (len(b)-len(head))*len(es)*17/16; guess > pooledListBytes {
				b = append(make([]byte, 0, guess), b...)
			}
		}
	}
	b = append(b, jsonListTail...)
	if cap(b) <= pooledListBytes {
		out := bytes.Clone(b)
		*pooled = b
		listBuffers.Put(pooled)
		return out
	}
	listBuffers.Put(pooled)
	return trimmed(b)
}

// pooledListBytes is the largest list written in a pooled buffer: an HPA's selection is a few kilobytes, and a
// pool of buffers the size of every pod's list would keep megabytes for nothing.
const pooledListBytes = 256 << 10

var listBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// jsonHead is the head of encode's encoding of the empty list at rv: everything up to its items' opening
// bracket; ok is false when it is not compact JSON.
func jsonHead[P any](k kind[P], rv string, created metav1.Time, encode encodeFunc) (head []byte, ok bool, err error) {
	var buf bytes.Buffer
	if err := encode(k.list(nil, rv, created), &buf); err != nil {
		return nil, false, err
	}
	b := buf.Bytes()
	if len(b) == 0 || b[0] != '{' || !bytes.HasSuffix(b, []byte(`"items":[]}`+"\n")) {
		return nil, false, nil
	}
	return bytes.Clone(b[:len(b)-len("]}\n")]), true, nil
}
