package api

import (
	"bytes"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// When its encoder's JSON is not written directly from the entries (directlists.go: an encoder's first list, or
// one found to differ), a full list's JSON is made from its items a chunk at a time, spliced between one
// envelope, so that making it holds the items of one chunk, not of every object: the items of a large cluster's
// pods are several times their JSON (a ResourceList map a container), and a list of every pod made them all at
// once, for an encoding that keeps none of them (BENCHMARKS.md, "A full list's JSON by chunks"). Compact JSON
// alone is spliced (envelopeOf says which it is): the chunks' envelopes (kind, apiVersion, metadata) are equal and
// the items come last, so every chunk is that envelope's head, its items, and the same tail. Any other encoding
// (protobuf, YAML, pretty JSON), or a chunk that does not have that shape, is made from every item at once.

// encodeFunc is how the apiserver's encoder encodes an object (runtime.CacheableObject's CacheEncode gets it).
type encodeFunc = func(runtime.Object, io.Writer) error

// listChunk is how many items are made and encoded at a time.
const listChunk = smallPage

// jsonItemsKey opens the items of a compact JSON list; jsonListTail closes the items and the list (the encoder ends
// each object with a newline).
var (
	jsonItemsKey = []byte(`"items":[`)
	jsonListTail = []byte("]}\n")
)

// encodeList makes encode's encoding (named id) of the list of es (version rv, made at created): written directly
// from the entries when the encoder is known to write them as they are written (directlists.go), else by
// the encoder, by chunks when it is compact JSON, else from every item at once.
func encodeList[P any](k kind[P], es []entry[P], rv string, created metav1.Time, id runtime.Identifier,
	encode encodeFunc, j *directLists) (listEncoding, error) {
	if j != nil {
		data, direct, err := directList(j, k, es, rv, created, id, encode)
		if err != nil {
			return listEncoding{}, err
		}
		if data.data != nil {
			listEncodings.WithLabelValues(map[bool]string{true: "direct", false: "encoder"}[direct]).Inc()
			return data, nil
		}
	}
	listEncodings.WithLabelValues("encoder").Inc()
	data, err := encodeByEncoder(k, es, rv, created, encode)
	return listEncoding{data: data}, err
}

// encodeByEncoder is encode's encoding of the list of es, by chunks when it is compact JSON.
func encodeByEncoder[P any](k kind[P], es []entry[P], rv string, created metav1.Time, encode encodeFunc) ([]byte, error) {
	if len(es) > listChunk {
		data, ok, err := encodeChunks(k, es, rv, created, encode)
		if err != nil || ok {
			return data, err
		}
	}
	var buf bytes.Buffer
	if err := encode(k.list(es, rv, created), &buf); err != nil {
		return nil, err
	}
	return trimmed(buf.Bytes()), nil
}

// trimmed is b, or an exact-size copy of it when its buffer has much room left: the bytes are kept as long as the
// build, and a buffer grown by doubling may be nearly half empty.
func trimmed(b []byte) []byte {
	if cap(b)-len(b) > len(b)/16 {
		return bytes.Clone(b)
	}
	return b
}

// encodeChunks makes the list's encoding from chunks of listChunk items when the encoding is compact JSON (the
// encoding of an empty list says, for next to nothing); ok is false when it is not, or a chunk's envelope differs
// from the first's (nothing is made then).
func encodeChunks[P any](k kind[P], es []entry[P], rv string, created metav1.Time,
	encode encodeFunc) (data []byte, ok bool, err error) {
	env, isList, err := envelopeOf(k, rv, created, encode)
	if err != nil {
		return nil, false, err
	}
	if !isList || env.proto {
		return nil, false, nil
	}
	var chunk bytes.Buffer
	if err := encode(k.list(es[:listChunk], rv, created), &chunk); err != nil {
		return nil, false, err
	}
	head, ok := jsonListHead(chunk.Bytes())
	if !ok {
		return nil, false, nil
	}
	head = bytes.Clone(head)
	// Sized from the first chunk, so that the output grows once or twice, not by doubling from nothing.
	out := bytes.NewBuffer(make([]byte, 0, chunk.Len()*(len(es)/listChunk+1)))
	out.Write(chunk.Bytes()[:chunk.Len()-len(jsonListTail)])
	for i := listChunk; i < len(es); i += listChunk {
		chunk.Reset()
		if err := encode(k.list(es[i:min(i+listChunk, len(es))], rv, created), &chunk); err != nil {
			return nil, false, err
		}
		items, ok := jsonListItems(chunk.Bytes(), head)
		if !ok {
			return nil, false, nil
		}
		out.WriteByte(',')
		out.Write(items)
	}
	out.Write(jsonListTail)
	return trimmed(out.Bytes()), true, nil
}

// jsonListHead returns the head of b, a compact JSON list with items: everything up to its items' opening bracket.
// ok is false for anything else. The list's "items":[ comes before every item, and a quote within an item's string
// is escaped, so its first occurrence is the list's.
func jsonListHead(b []byte) (head []byte, ok bool) {
	if len(b) == 0 || b[0] != '{' || !bytes.HasSuffix(b, jsonListTail) {
		return nil, false
	}
	i := bytes.Index(b, jsonItemsKey)
	if i < 0 || i+len(jsonItemsKey) >= len(b)-len(jsonListTail) {
		return nil, false
	}
	return b[:i+len(jsonItemsKey)], true
}

// jsonListItems returns the items of b, a chunk's compact JSON list whose head is head; ok is false when it has
// another head, no items, or another tail.
func jsonListItems(b, head []byte) (items []byte, ok bool) {
	if !bytes.HasPrefix(b, head) || !bytes.HasSuffix(b, jsonListTail) || len(b) <= len(head)+len(jsonListTail) {
		return nil, false
	}
	return b[len(head) : len(b)-len(jsonListTail)], true
}
