package api

import (
	"encoding/json"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// The items of a list in compact JSON are written here from the entries, not made as API objects for encoding/json
// to walk: under 2,000 HPAs, serving lists was most of the server's CPU, nearly all of it the reflection encoder
// walking each item's maps and the collector freeing the items it made (BENCHMARKS.md, issue 29). What is written
// is, byte for byte, what the apiserver's JSON encoder writes for the item inside a list (no kind or apiVersion):
// the tests compare the two on every shape an entry can take, and an encoder's lists are written directly only
// once one of its lists compared equal (directlists.go).

// appendPodJSON appends the JSON of e's PodMetrics item (podMetrics).
func appendPodJSON(b []byte, e *entry[storage.PodPoint], rv string, created metav1.Time, s *itemScratch) []byte {
	b = appendObjectMeta(b, &e.object, rv, created, s)
	b = appendPointTime(b, e.point.Timestamp, e.point.Window, s)
	b = append(b, `,"containers":[`...)
	for i, name := range e.point.Names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, name, s)
		b = append(b, `,"usage":`...)
		b = appendUsageJSON(b, e.point.Usages[i], s)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendNodeJSON appends the JSON of e's NodeMetrics item (nodeMetrics).
func appendNodeJSON(b []byte, e *entry[storage.NodePoint], rv string, created metav1.Time, s *itemScratch) []byte {
	b = appendObjectMeta(b, &e.object, rv, created, s)
	b = appendPointTime(b, e.point.Timestamp, e.point.Window, s)
	b = append(b, `,"usage":`...)
	b = appendUsageJSON(b, e.point.Usage, s)
	return append(b, '}')
}

// appendObjectMeta opens an item and writes its metadata, the fields podMetrics and nodeMetrics set, each omitted
// when empty as ObjectMeta's tags say.
func appendObjectMeta(b []byte, o *object, rv string, created metav1.Time, s *itemScratch) []byte {
	b = append(b, `{"metadata":{`...)
	n := len(b)
	field := func(b []byte, key string) []byte {
		if len(b) > n {
			b = append(b, ',')
		}
		return append(b, key...)
	}
	if o.name != "" {
		b = appendJSONString(field(b, `"name":`), o.name, s)
	}
	if o.namespace != "" {
		b = appendJSONString(field(b, `"namespace":`), o.namespace, s)
	}
	if rv != "" {
		b = appendJSONString(field(b, `"resourceVersion":`), rv, s)
	}
	if !created.IsZero() {
		b = appendJSONTime(field(b, `"creationTimestamp":`), created.Time)
	}
	if len(o.labels) > 0 {
		b = appendStringMap(field(b, `"labels":`), o.labels, s)
	}
	return append(b, '}')
}

// itemScratch is what writing a list's items reuses from one item to the next: the last window written (a list's
// windows are nearly all equal) and room to sort label keys.
type itemScratch struct {
	window     time.Duration
	windowJSON []byte
	keys       []string
	// failed: a value could not be written (a marshaller failed); the list is then made by its encoder.
	failed bool
	// quantity holds a quantity's JSON on its way into protobuf (itemproto.go).
	quantity []byte
}

// newItemScratch is a scratch for writing one list.
func newItemScratch() *itemScratch { return &itemScratch{quantity: make([]byte, 0, 48)} }

// appendPointTime writes an item's timestamp and window (as metav1.Duration does: its String, quoted).
func appendPointTime(b []byte, ts time.Time, window time.Duration, s *itemScratch) []byte {
	b = append(b, `,"timestamp":`...)
	b = appendJSONTime(b, ts)
	b = append(b, `,"window":`...)
	if s.windowJSON == nil || s.window != window {
		s.window, s.windowJSON = window, appendJSONString(s.windowJSON[:0], window.String(), s)
	}
	return append(b, s.windowJSON...)
}

// appendJSONTime writes t as metav1.Time does: RFC 3339 in UTC to the second, null when zero.
func appendJSONTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339)
	return append(b, '"')
}

// appendUsageJSON writes a usage as its ResourceList (resourceList): keys in encoding/json's order, which sorts a
// map's keys, and each quantity as Quantity.MarshalJSON writes it.
func appendUsageJSON(b []byte, u storage.Usage, s *itemScratch) []byte {
	b = append(b, `{"cpu":`...)
	b = appendCPUJSON(b, u.CPU, s)
	b = append(b, `,"memory":`...)
	b = appendBytesJSON(b, u.Memory, s)
	if swap, ok := u.Swap(); ok {
		b = append(b, `,"`+string(resourceSwap)+`":`...)
		b = appendBytesJSON(b, swap, s)
	}
	return append(b, '}')
}

// appendQuantity writes q as Quantity.MarshalJSON does.
func appendQuantity(b []byte, q resource.Quantity, s *itemScratch) []byte {
	data, err := q.MarshalJSON()
	if err != nil { // it never fails; should it, the encoder makes the list
		s.failed = true
	}
	return append(b, data...)
}

// appendStringMap writes m as encoding/json does: keys sorted by their bytes.
func appendStringMap(b []byte, m map[string]string, s *itemScratch) []byte {
	keys := s.keys[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s.keys = keys
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k, s)
		b = append(b, ':')
		b = appendJSONString(b, m[k], s)
	}
	return append(b, '}')
}

// appendJSONString writes str as a JSON string as encoding/json does (HTML characters escaped, invalid UTF-8
// replaced). Names, label keys and values are plain ASCII that needs no escape; anything else goes through
// encoding/json itself, so that its rules stay its own.
func appendJSONString(b []byte, str string, s *itemScratch) []byte {
	if plainJSON(str) {
		b = append(b, '"')
		b = append(b, str...)
		return append(b, '"')
	}
	quoted, err := json.Marshal(str)
	if err != nil { // a string always marshals; should it not, the encoder makes the list
		s.failed = true
	}
	return append(b, quoted...)
}

// plainJSON reports whether s is written as it is between quotes: printable ASCII other than the quote, the
// backslash and the characters encoding/json escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
