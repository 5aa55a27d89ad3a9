package api

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// directEncoders are the encoders whose lists are written directly, compact JSON and protobuf, of both served
// versions.
func directEncoders(t testing.TB) map[string]runtime.Encoder {
	v1 := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1"}
	return map[string]runtime.Encoder{
		"json v1beta1":     encoderFor(t, runtime.ContentTypeJSON, false, v1beta1.SchemeGroupVersion),
		"json v1":          encoderFor(t, runtime.ContentTypeJSON, false, v1),
		"protobuf v1beta1": encoderFor(t, runtime.ContentTypeProtobuf, false, v1beta1.SchemeGroupVersion),
		"protobuf v1":      encoderFor(t, runtime.ContentTypeProtobuf, false, v1),
	}
}

// assertWrittenAsEncoded fails t unless the list of es written from the entries is, byte for byte, enc's encoding.
func assertWrittenAsEncoded[P any](t *testing.T, at string, k kind[P], enc runtime.Encoder, es []entry[P], rv string,
	created metav1.Time) {
	t.Helper()
	var want bytes.Buffer
	if err := enc.Encode(k.list(es, rv, created), &want); err != nil {
		t.Fatalf("%s: %v", at, err)
	}
	env, ok, err := envelopeOf(k, rv, created, enc.Encode)
	if err != nil || !ok {
		t.Fatalf("%s: the empty list is neither compact JSON nor protobuf (%v)", at, err)
	}
	var got listEncoding
	if env.proto {
		got, ok = writeProtoList(k, env, es, rv, created)
	} else {
		got, ok = writeList(k, env.head, es, rv, created)
	}
	if !ok || !bytes.Equal(got.data, want.Bytes()) {
		t.Errorf("%s: written\n%q\nthe encoder's\n%q", at, got.data, want.Bytes())
	}
	got.done()
}

// manyLabels is n labels, more than a small map's keys.
func manyLabels(n int) map[string]string {
	m := map[string]string{}
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("k%02d.example.com/key-%d", (i*7)%n, i)] = fmt.Sprintf("v%d", i)
	}
	return m
}

// TestItemsAsTheEncoders: every shape an entry can take is written as both versions' JSON encoders write it:
// labels that need escaping (HTML characters, quotes, control characters, invalid UTF-8, U+2028), more labels than
// a small array holds, times zero and not, windows, containers none to several, swap, values past int64.
func TestItemsAsTheEncoders(t *testing.T) {
	created := metav1.NewTime(sampleTime.Add(-time.Hour))
	odd := map[string]string{"a<b>": "x&y", "lt": "<", "gt": ">", "amp": "&", `q"uote`: `back\slash`, "ctl": "tab\there\x01", "utf8": "é☃",
		"bad": "\xff\xfe", "sep": "line\u2028para\u2029", "del": "\x7f", "": "empty-key"}
	usage := storageUsage(1_500_000, 1536)
	pods := map[string]entry[storage.PodPoint]{
		"plain": labeledPodEntries(1)[0],
		"no labels": {object: object{namespace: "ns", name: "p"},
			point: podPoint(storage.ContainerPoint{Name: "c", Usage: usage})},
		"odd labels": {object: object{namespace: "ns", name: "p", labels: odd},
			point: podPoint(storage.ContainerPoint{Name: "c<&>", Usage: usage})},
		"many labels": {object: object{namespace: "ns", name: "p", labels: manyLabels(40)},
			point: podPoint(storage.ContainerPoint{Name: "c", Usage: usage})},
		"no containers": {object: object{namespace: "ns", name: "p"}, point: podPoint()},
		"empty containers": {object: object{namespace: "ns", name: "p"},
			point: storage.PodPoint{Timestamp: sampleTime, Window: time.Second, Names: []string{}, Usages: []storage.Usage{}}},
		"zero timestamp, odd window": {object: object{namespace: "ns", name: "p"},
			point: storage.PodPoint{Window: 90*time.Second + 1500*time.Microsecond, Names: []string{"c"}, Usages: []storage.Usage{usage}}},
		"swap and huge values": {object: object{namespace: "ns", name: "p"}, point: podPoint(
			storage.ContainerPoint{Name: "a", Usage: storage.Usage{CPU: math.MaxUint64, Memory: math.MaxUint64}.WithSwap(1 << 40)},
			storage.ContainerPoint{Name: "b", Usage: storage.Usage{CPU: 1e9, Memory: 1<<30 + 1}.WithSwap(0)},
			storage.ContainerPoint{Name: "c", Usage: storage.Usage{CPU: 999, Memory: 1000}.WithSwap(math.MaxUint64)})},
		"no name, no namespace": {point: podPoint(storage.ContainerPoint{Name: "c", Usage: usage})},
	}
	nodes := map[string]entry[storage.NodePoint]{
		"plain": {object: object{name: "node-a", labels: map[string]string{"role": "worker"}},
			point: storage.NodePoint{Timestamp: sampleTime, Window: 15 * time.Second, Usage: storageUsage(250_000_000, 3<<30)}},
		"odd labels, swap": {object: object{name: "node-a", labels: odd},
			point: storage.NodePoint{Timestamp: sampleTime, Window: time.Minute, Usage: usage.WithSwap(12345)}},
		"zero everything": {},
	}
	for version, enc := range directEncoders(t) {
		for _, rv := range []string{"42", ""} {
			for _, c := range []metav1.Time{created, {}} {
				at := func(name string) string {
					return fmt.Sprintf("%s rv=%q created=%v: %s", version, rv, !c.IsZero(), name)
				}
				for name, e := range pods {
					assertWrittenAsEncoded(t, at("pod "+name), kind[storage.PodPoint](podKind{}), enc, []entry[storage.PodPoint]{e}, rv, c)
				}
				for name, e := range nodes {
					assertWrittenAsEncoded(t, at("node "+name), kind[storage.NodePoint](nodeKind{}), enc, []entry[storage.NodePoint]{e}, rv, c)
				}
				assertWrittenAsEncoded(t, at("30 pods"), kind[storage.PodPoint](podKind{}), enc, labeledPodEntries(30), rv, c)
				assertWrittenAsEncoded(t, at("no pods"), kind[storage.PodPoint](podKind{}), enc, nil, rv, c)
			}
		}
	}
}

// TestItemsAtExtremeTimes (the review's): times a kubelet or Prometheus may report (nanoseconds, years past 9999
// or before 1, another zone) and windows at the int64 bounds are written as the encoder writes them.
func TestItemsAtExtremeTimes(t *testing.T) {
	zone := time.FixedZone("x", -(13*3600 + 17))
	times := []time.Time{
		time.Unix(0, 1), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(math.MaxInt64/4, 0),
		time.Unix(math.MinInt64/4, 0), time.Date(2026, 1, 1, 0, 0, 0, 5, zone), time.Time{}.Add(time.Nanosecond),
	}
	for version, enc := range directEncoders(t) {
		for _, ts := range times {
			for _, w := range []time.Duration{math.MinInt64, math.MaxInt64, 0, -1, time.Microsecond} {
				pod := entry[storage.PodPoint]{object: object{namespace: "ns", name: "p"}, point: storage.PodPoint{
					Timestamp: ts, Window: w, Names: []string{"c"}, Usages: []storage.Usage{storageUsage(1, 1)}}}
				assertWrittenAsEncoded(t, fmt.Sprintf("%s %v %v", version, ts, w), kind[storage.PodPoint](podKind{}),
					enc, []entry[storage.PodPoint]{pod}, "1", metav1.NewTime(ts))
			}
		}
	}
}

// FuzzItems: a pod and a node of any names, labels, values and times are written as the encoder writes them.
func FuzzItems(f *testing.F) {
	f.Add("ns", "pod", "app", "web", "c", uint64(1_500_000), uint64(1536), uint64(0), int64(15e9), int64(1.7e9), "42")
	f.Add("n<s>", "p&\"", "\xff", "\u2028", "", uint64(math.MaxUint64), uint64(1<<63), uint64(7), int64(-1), int64(0), "")
	encoders := directEncoders(f)
	f.Fuzz(func(t *testing.T, ns, name, key, value, container string, cpu, mem, swap uint64, window, unix int64, rv string) {
		u := storage.Usage{CPU: cpu, Memory: mem}
		if swap > 0 {
			u = u.WithSwap(swap - 1)
		}
		// Times the API can carry: metav1.Time writes RFC 3339, which has four-digit years.
		ts := time.Unix(unix%253402300799, unix%1e9)
		if ts.Year() < 1 {
			ts = time.Time{}
		}
		labels := map[string]string{key: value, strings.ToUpper(key) + "x": value + value}
		created := metav1.NewTime(ts)
		pod := entry[storage.PodPoint]{object: object{namespace: ns, name: name, labels: labels},
			point: storage.PodPoint{Timestamp: ts, Window: time.Duration(window), Names: []string{container, name},
				Usages: []storage.Usage{u, u}}}
		enc := encoders[[]string{"json v1beta1", "json v1", "protobuf v1beta1", "protobuf v1"}[uint64(unix)%4]]
		assertWrittenAsEncoded(t, "pod", kind[storage.PodPoint](podKind{}), enc, []entry[storage.PodPoint]{pod, pod}, rv, created)
		node := entry[storage.NodePoint]{object: object{name: name, labels: labels},
			point: storage.NodePoint{Timestamp: ts, Window: time.Duration(window), Usage: u}}
		assertWrittenAsEncoded(t, "node", kind[storage.NodePoint](nodeKind{}), enc, []entry[storage.NodePoint]{node}, rv, created)
	})
}

// FuzzQuantityJSON: CPU and bytes are written as their quantities marshal, whatever the value.
func FuzzQuantityJSON(f *testing.F) {
	for _, v := range []uint64{0, 1, 999, 1000, 1023, 1024, 1025, 1536, 1 << 20, 1<<20 + 1, 1e9, 1e18, 123_456_789,
		math.MaxInt64 / 10, math.MaxInt64/100 + 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v uint64) {
		for _, c := range []struct {
			name  string
			write func([]byte, uint64) []byte
			q     resource.Quantity
		}{
			{"cpu", func(b []byte, v uint64) []byte { return appendCPUJSON(b, v, &itemScratch{}) }, uint64Quantity(v, resource.DecimalSI, -9)},
			{"bytes", func(b []byte, v uint64) []byte { return appendBytesJSON(b, v, &itemScratch{}) }, uint64Quantity(v, resource.BinarySI, 0)},
		} {
			want, err := c.q.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if got := c.write([]byte("x"), v); string(got) != "x"+string(want) {
				t.Errorf("%s %d: written %s, marshalled %s", c.name, v, got[1:], want)
			}
		}
	})
}

// TestQuantityJSONAtRandom: 200,000 values of every magnitude, many with trailing zeros or powers of 1,024, are
// written as their quantities marshal.
func TestQuantityJSONAtRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200_000; i++ {
		v := r.Uint64() >> r.IntN(64)
		switch i % 3 {
		case 1:
			v = v >> 32 * uint64(math.Pow10(r.IntN(10)))
		case 2:
			v = v >> 32 << (10 * r.IntN(4))
		}
		cpu, _ := uint64Quantity(v, resource.DecimalSI, -9).MarshalJSON()
		mem, _ := uint64Quantity(v, resource.BinarySI, 0).MarshalJSON()
		if got := appendCPUJSON(nil, v, &itemScratch{}); string(got) != string(cpu) {
			t.Fatalf("cpu %d: written %s, marshalled %s", v, got, cpu)
		}
		if got := appendBytesJSON(nil, v, &itemScratch{}); string(got) != string(mem) {
			t.Fatalf("bytes %d: written %s, marshalled %s", v, got, mem)
		}
	}
}
