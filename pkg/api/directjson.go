package api

import (
	"bytes"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// directJSON decides, per encoder, whether a list's JSON is written directly from its entries (itemjson.go) or made
// by the encoder: an encoder the apiserver names by an identifier has its lists written directly once its first
// list with items, made by it, is byte for byte the one written directly; an encoder whose list differs, or that
// does not write compact JSON, keeps making its lists. The comparison is made once per encoder and per process, on
// whatever that first list holds: what guards every other input (escapes, invalid UTF-8, extreme values) is
// TestItemJSONAsTheEncoders and the fuzzers, to run again whenever the Kubernetes modules change. What the encoder
// alone knows, the list's envelope (kind, apiVersion, metadata), is its own encoding of the empty list, kept for
// the last resourceVersion asked.
type directJSON struct {
	mu   sync.Mutex
	byID map[runtime.Identifier]*encoderVerdict
}

// encoderVerdict is what was learned of one encoder.
type encoderVerdict struct {
	checked, direct bool   // compared on a list with items; its lists are written directly
	rv              string // the resourceVersion head was made for
	head            []byte // the empty list's encoding up to its items
}

// maxEncoders bounds the encoders directJSON remembers: the apiserver has about a dozen (a format, pretty or not,
// strict or not, at a version), and a request cannot make more; beyond it, lists are made by their encoder.
const maxEncoders = 64

func newDirectJSON() *directJSON { return &directJSON{byID: map[runtime.Identifier]*encoderVerdict{}} }

// verdict returns what is known of id's encoder (a copy), and whether it may be remembered.
func (j *directJSON) verdict(id runtime.Identifier) (encoderVerdict, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	v, ok := j.byID[id]
	if !ok {
		return encoderVerdict{}, len(j.byID) < maxEncoders
	}
	return *v, true
}

// learn records what id's encoder was found to do, and the head made for rv.
func (j *directJSON) learn(id runtime.Identifier, v encoderVerdict) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.byID[id]; !ok && len(j.byID) >= maxEncoders {
		return
	}
	j.byID[id] = &v
}

// directList is id's encoding of the list of es. direct says it was written directly from the entries; without
// data, the encoder must make it (not compact JSON, found to differ, not yet compared on a list with items, one
// identifier too many, or an item that could not be written). An encoder's first list with items is both written
// directly and made by the encoder, the two compared, and the encoder's returned.
func directList[P any](j *directJSON, k kind[P], es []entry[P], rv string, created metav1.Time,
	id runtime.Identifier, encode encodeFunc) (data []byte, direct bool, err error) {
	v, known := j.verdict(id)
	if !known || (v.checked && !v.direct) || (!v.checked && len(es) == 0) {
		return nil, false, nil
	}
	head := v.head
	if v.rv != rv {
		h, isJSON, err := jsonHead(k, rv, created, encode)
		if err != nil {
			return nil, false, err
		}
		if !isJSON {
			j.learn(id, encoderVerdict{checked: true})
			return nil, false, nil
		}
		head = h
	}
	written, ok := writeList(k, head, es, rv, created)
	if !ok {
		return nil, false, nil
	}
	if v.checked {
		if v.rv != rv {
			j.learn(id, encoderVerdict{checked: true, direct: true, rv: rv, head: head})
		}
		return written, true, nil
	}
	encoded, err := encodeByEncoder(k, es, rv, created, encode)
	if err != nil {
		return nil, false, err
	}
	same := bytes.Equal(written, encoded)
	if !same {
		klog.InfoS("Lists for this encoder are made by it: its JSON differs from the one written directly",
			"resource", k.info().resource.String(), "encoder", string(id))
	}
	j.learn(id, encoderVerdict{checked: true, direct: same, rv: rv, head: head})
	return encoded, false, nil
}

// writeList writes the compact JSON list of es whose envelope up to its items is head; ok is false when an item
// could not be written. Its buffer is sized by the answer budget's estimate of the JSON (jsonBytes), which a
// user's labels cannot inflate, and grows as the items need: a list up to pooledListBytes is written in a buffer
// kept for the next and copied out at its size.
func writeList[P any](k kind[P], head []byte, es []entry[P], rv string, created metav1.Time) (_ []byte, ok bool) {
	var s jsonScratch
	guess := len(head) + int(jsonBytes(es)) + len(jsonListTail)
	var b []byte
	var pooled *[]byte
	if guess <= pooledListBytes {
		pooled = listBuffers.Get().(*[]byte)
		b = (*pooled)[:0]
	} else {
		b = make([]byte, 0, guess)
	}
	b = append(b, head...)
	for i := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = k.appendJSON(b, &es[i], rv, created, &s)
	}
	b = append(b, jsonListTail...)
	if pooled == nil {
		return trimmed(b), !s.failed
	}
	out := bytes.Clone(b)
	if cap(b) <= pooledListBytes {
		*pooled = b
	}
	listBuffers.Put(pooled)
	return out, !s.failed
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
