package api

import (
	"bytes"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kubernetes' protobuf is a four-byte prefix and a runtime.Unknown: the object's type (field 1), the object's own
// protobuf (field 2), and its content encoding and type (fields 3 and 4). A list's own protobuf is its ListMeta
// (field 1) and one field 2 per item.

// protoPrefix opens every object Kubernetes encodes as protobuf.
var protoPrefix = []byte("k8s\x00")

// protoEnvelope splits the protobuf encoding of an empty list around its list (field 2 of the Unknown), by its
// fields' structure, so that no byte of a resourceVersion can shift it; ok is false when b is not one.
func protoEnvelope(b []byte) (env envelope, ok bool) {
	if !bytes.HasPrefix(b, protoPrefix) {
		return envelope{}, false
	}
	for at := len(protoPrefix); at < len(b); {
		num, typ, n := protowire.ConsumeTag(b[at:])
		if n < 0 {
			return envelope{}, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[at+n:])
		if m < 0 {
			return envelope{}, false
		}
		if num == 2 && typ == protowire.BytesType {
			raw, k := protowire.ConsumeBytes(b[at+n:])
			if k < 0 {
				return envelope{}, false
			}
			return envelope{proto: true, head: bytes.Clone(b[:at]), listMeta: bytes.Clone(raw),
				tail: bytes.Clone(b[at+n+m:])}, true
		}
		at += n + m
	}
	return envelope{}, false
}

// writeProtoList writes the protobuf list of es in env (protoEnvelope); ok is false when an item could not be
// written. Its buffers are writeList's: the kept one, then for a long list one of the size extrapolated from its
// last items (written first), grown only as the items need, and copied out only when an eighth of it is left over.
func writeProtoList[P any](k kind[P], env envelope, es []entry[P], rv string, created metav1.Time) (_ listEncoding, ok bool) {
	s := newItemScratch()
	pooled := listBuffers.Get().(*[]byte)
	p := &protoBack{b: (*pooled)[:cap(*pooled)]}
	p.i = len(p.b)
	p.putBytes(env.tail)
	from := p.size()
	for i := len(es) - 1; i >= 0; i-- {
		item := p.size()
		k.appendProto(p, &es[i], rv, created, s)
		p.closeMessage(0x12, item)
		if done := len(es) - i; done == sampleItems && len(es) > sampleItems {
			// The tail, the items extrapolated, the ListMeta, the list's tag and length (at most 11 bytes) and
			// the head.
			estimate := int(jsonBytes(es))
			p.reserve(from + extrapolated(p.size()-from, done, len(es), estimate) + len(env.listMeta) + 11 + len(env.head))
		}
	}
	p.putBytes(env.listMeta)
	p.closeMessage(0x12, from)
	p.putBytes(env.head)
	out := p.b[p.i:]
	if cap(p.b) > pooledListBytes {
		listBuffers.Put(pooled)
		if p.i > len(out)/8 {
			return listEncoding{data: bytes.Clone(out)}, !s.failed
		}
		return listEncoding{data: out}, !s.failed
	}
	return listEncoding{data: out, buf: p.b, pooled: pooled}, !s.failed
}
