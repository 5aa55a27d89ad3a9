package api

import (
	"encoding/binary"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// The protobuf of a list's items, written directly from the entries as itemjson.go writes their JSON: the HPA
// controller reads resource metrics as protobuf (kube-controller-manager's --kube-api-content-type), one list per
// HorizontalPodAutoscaler per sync, and making each list's items (a ResourceList map a container) for the
// generated marshallers was most of what serving them allocated. The writer mirrors the generated
// MarshalToSizedBuffer code of k8s.io/metrics and k8s.io/apimachinery: it writes backwards, fields in reverse
// order, each nested message's length after its content, so that no size is computed beforehand. The tests
// compare its bytes with the encoder's on every shape an entry can take, and an encoder's lists are written
// directly only once one of its lists compared equal (directlists.go).

// protoBack is a buffer written backwards: its content is b[i:].
type protoBack struct {
	b []byte
	i int
}

// size is how many bytes were written.
func (p *protoBack) size() int { return len(p.b) - p.i }

// room makes room for n more bytes before the content.
func (p *protoBack) room(n int) {
	if p.i < n {
		p.resize(max(2*len(p.b), p.size()+n+256))
	}
}

// reserve makes the buffer total bytes long, when that is more: what a list is extrapolated to need, so that it is
// not copied again as it grows nor trimmed after.
func (p *protoBack) reserve(total int) {
	if total > len(p.b) {
		p.resize(total)
	}
}

// resize moves the content to the end of a new buffer total bytes long.
func (p *protoBack) resize(total int) {
	size := p.size()
	nb := make([]byte, total)
	copy(nb[total-size:], p.b[p.i:])
	p.b, p.i = nb, total-size
}

func (p *protoBack) put(s string) {
	p.room(len(s))
	p.i -= len(s)
	copy(p.b[p.i:], s)
}

func (p *protoBack) varint(v uint64) {
	var scratch [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(scratch[:], v)
	p.room(n)
	p.i -= n
	copy(p.b[p.i:], scratch[:n])
}

func (p *protoBack) tag(t byte) {
	p.room(1)
	p.i--
	p.b[p.i] = t
}

func (p *protoBack) putBytes(b []byte) {
	p.room(len(b))
	p.i -= len(b)
	copy(p.b[p.i:], b)
}

// str writes a string field.
func (p *protoBack) str(tag byte, s string) {
	p.put(s)
	p.varint(uint64(len(s)))
	p.tag(tag)
}

// strBytes writes a string field given as bytes.
func (p *protoBack) strBytes(tag byte, b []byte) {
	p.putBytes(b)
	p.varint(uint64(len(b)))
	p.tag(tag)
}

// closeMessage writes the length and tag of a nested message whose content began at size from (size before it).
func (p *protoBack) closeMessage(tag byte, from int) {
	p.varint(uint64(p.size() - from))
	p.tag(tag)
}

// podProto writes e's PodMetrics item (podMetrics), as v1beta1 PodMetrics.MarshalToSizedBuffer does.
func podProto(p *protoBack, e *entry[storage.PodPoint], rv string, created metav1.Time, s *itemScratch) {
	for i := len(e.point.Names) - 1; i >= 0; i-- {
		from := p.size()
		usageProto(p, 0x12, e.point.Usages[i], s)
		p.str(0xa, e.point.Names[i])
		p.closeMessage(0x22, from)
	}
	pointTimeProto(p, e.point.Timestamp, e.point.Window)
	objectMetaProto(p, &e.object, rv, created, s)
}

// nodeProto writes e's NodeMetrics item (nodeMetrics), as v1beta1 NodeMetrics.MarshalToSizedBuffer does.
func nodeProto(p *protoBack, e *entry[storage.NodePoint], rv string, created metav1.Time, s *itemScratch) {
	usageProto(p, 0x22, e.point.Usage, s)
	pointTimeProto(p, e.point.Timestamp, e.point.Window)
	objectMetaProto(p, &e.object, rv, created, s)
}

// pointTimeProto writes an item's window (field 3) and timestamp (field 2).
func pointTimeProto(p *protoBack, ts time.Time, window time.Duration) {
	from := p.size()
	p.varint(uint64(window))
	p.tag(0x8)
	p.closeMessage(0x1a, from)
	timeProto(p, 0x12, ts)
}

// timeProto writes a metav1.Time field: nothing inside when zero, else its seconds and nanoseconds (always 0:
// metav1.Time carries seconds only).
func timeProto(p *protoBack, tag byte, t time.Time) {
	from := p.size()
	if !t.IsZero() {
		p.varint(0)
		p.tag(0x10)
		p.varint(uint64(t.Unix()))
		p.tag(0x8)
	}
	p.closeMessage(tag, from)
}

// objectMetaProto writes the item's metadata (field 1) as ObjectMeta.MarshalToSizedBuffer does for the fields
// podMetrics and nodeMetrics set; the others are empty strings, a zero generation and no lists.
func objectMetaProto(p *protoBack, o *object, rv string, created metav1.Time, s *itemScratch) {
	from := p.size()
	if len(o.labels) > 0 {
		keys := s.keys[:0]
		for k := range o.labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		s.keys = keys
		for i := len(keys) - 1; i >= 0; i-- {
			at := p.size()
			p.str(0x12, o.labels[keys[i]])
			p.str(0xa, keys[i])
			p.closeMessage(0x5a, at)
		}
	}
	timeProto(p, 0x42, created.Time)
	p.varint(0) // generation
	p.tag(0x38)
	p.str(0x32, rv)
	p.str(0x2a, "") // uid
	p.str(0x22, "") // selfLink
	p.str(0x1a, o.namespace)
	p.str(0x12, "") // generateName
	p.str(0xa, o.name)
	p.closeMessage(0xa, from)
}

// usageProto writes a usage as its ResourceList map field: entries in reverse order of their sorted keys (cpu,
// memory, swap), each a key and a Quantity message of its canonical string.
func usageProto(p *protoBack, tag byte, u storage.Usage, s *itemScratch) {
	if swap, ok := u.Swap(); ok {
		quantityEntryProto(p, tag, string(resourceSwap), appendBytesJSON(s.quantity[:0], swap, s), s)
	}
	quantityEntryProto(p, tag, "memory", appendBytesJSON(s.quantity[:0], u.Memory, s), s)
	quantityEntryProto(p, tag, "cpu", appendCPUJSON(s.quantity[:0], u.CPU, s), s)
}

// quantityEntryProto writes one map entry of a ResourceList; quoted is the quantity's JSON (its canonical string,
// quoted), which a marshaller that failed leaves without quotes: the list is then made by its encoder.
func quantityEntryProto(p *protoBack, tag byte, key string, quoted []byte, s *itemScratch) {
	if len(quoted) < 2 {
		s.failed = true
		return
	}
	from := p.size()
	p.strBytes(0xa, quoted[1:len(quoted)-1])
	p.closeMessage(0x12, from)
	p.str(0xa, key)
	p.closeMessage(tag, from)
}
