package api

import (
	"bytes"
	"fmt"
	"io"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestProtoLongLengths (the review's): items and lists whose lengths need 2-, 3- and 4-byte varints, many labels,
// many containers, are written as the protobuf encoders write them.
func TestProtoLongLengths(t *testing.T) {
	created := metav1.NewTime(sampleTime)
	usage := storageUsage(1_500_000, 1536).WithSwap(7)
	many := map[string]string{}
	for i := 0; i < 5000; i++ {
		many[fmt.Sprintf("k%d", i)] = ""
	}
	names := make([]string, 1000)
	usages := make([]storage.Usage, 1000)
	for i := range names {
		names[i] = strings.Repeat("c", i)
		usages[i] = usage
	}
	pods := map[string]entry[storage.PodPoint]{
		"200-byte value": {object: object{namespace: "ns", name: strings.Repeat("n", 200),
			labels: map[string]string{"a": strings.Repeat("v", 200)}}, point: podPoint(storage.ContainerPoint{Name: "c", Usage: usage})},
		"20 KB value": {object: object{namespace: "ns", name: "p",
			labels: map[string]string{"a": strings.Repeat("v", 20_000)}}, point: podPoint(storage.ContainerPoint{Name: "c", Usage: usage})},
		"3 MB value": {object: object{namespace: "ns", name: "p",
			labels: map[string]string{"a": strings.Repeat("v", 3<<20)}}, point: podPoint(storage.ContainerPoint{Name: "c", Usage: usage})},
		"5000 labels": {object: object{namespace: "ns", name: "p", labels: many}, point: podPoint(storage.ContainerPoint{Name: "c", Usage: usage})},
		"1000 containers": {object: object{namespace: "ns", name: "p"},
			point: storage.PodPoint{Timestamp: sampleTime, Window: 1, Names: names, Usages: usages}},
	}
	for version, enc := range directEncoders(t) {
		if !strings.HasPrefix(version, "protobuf") {
			continue
		}
		for name, e := range pods {
			assertWrittenAsEncoded(t, version+" "+name, kind[storage.PodPoint](podKind{}), enc, []entry[storage.PodPoint]{e, e}, "7", created)
		}
		assertWrittenAsEncoded(t, version+" 20,000 pods", kind[storage.PodPoint](podKind{}), enc, labeledPodEntries(20_000), "7", created)
	}
}

// TestDirectListsOfEveryFormatConcurrently (the review's): protobuf and JSON lists of both versions, written at once
// through one directLists, are each the encoder's bytes (run with -race).
func TestDirectListsOfEveryFormatConcurrently(t *testing.T) {
	created := metav1.NewTime(sampleTime)
	v1 := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1"}
	encs := []runtime.Encoder{
		encoderFor(t, runtime.ContentTypeProtobuf, false, v1beta1.SchemeGroupVersion),
		encoderFor(t, runtime.ContentTypeProtobuf, false, v1),
		encoderFor(t, runtime.ContentTypeJSON, false, v1),
	}
	j := newDirectLists()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 40; i++ {
				enc := encs[(g+i)%len(encs)]
				es := labeledPodEntries((g * i) % 90)
				rv := fmt.Sprint(i % 3)
				got, err := encodeList[storage.PodPoint](podKind{}, es, rv, created, enc.Identifier(), enc.Encode, j)
				if err != nil {
					t.Error(err)
					return
				}
				var want bytes.Buffer
				if err := enc.Encode(podKind{}.list(es, rv, created), &want); err != nil {
					t.Error(err)
					return
				}
				same := bytes.Equal(got.data, want.Bytes())
				got.done()
				if !same {
					t.Errorf("goroutine %d, list %d (%s): not the encoder's bytes", g, i, enc.Identifier())
					return
				}
			}
		})
	}
	wg.Wait()
	for _, enc := range encs {
		if v, _ := j.verdict(enc.Identifier()); !v.direct {
			t.Errorf("%s: not written directly", enc.Identifier())
		}
	}
}

// TestLongListNotCopiedOut (the review's): a long list of like pods is written once into a buffer sized for it,
// and kept as written, not copied out again at its size (which doubles what it allocates and holds at once).
// Protobuf failed before: it reserved the sampled items twice over, so its buffer was always more than a sixteenth
// too large and the whole list was copied (2.07x the list allocated).
func TestLongListNotCopiedOut(t *testing.T) {
	created := metav1.NewTime(sampleTime)
	es := labeledPodEntries(30_000)
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		enc := encoderFor(t, mediaType, false, v1beta1.SchemeGroupVersion)
		env, ok, err := envelopeOf(kind[storage.PodPoint](podKind{}), "9", created, enc.Encode)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		var got listEncoding
		if env.proto {
			got, _ = writeProtoList(kind[storage.PodPoint](podKind{}), env, es, "9", created)
		} else {
			got, _ = writeList(kind[storage.PodPoint](podKind{}), env.head, es, "9", created)
		}
		goruntime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		if limit := uint64(len(got.data)) * 5 / 4; allocated > limit {
			t.Errorf("%s list of 30,000 pods: %d bytes, allocated %d (%.2fx), more than %d", mediaType, len(got.data),
				allocated, float64(allocated)/float64(len(got.data)), limit)
		}
	}
}

// TestProtoThatDiffersIsNotWritten (the review's): a protobuf encoder whose items are not the written ones (a
// resource renamed) keeps making its lists, and every answer is its own.
func TestProtoThatDiffersIsNotWritten(t *testing.T) {
	created := metav1.NewTime(sampleTime)
	pb := encoderFor(t, runtime.ContentTypeProtobuf, false, v1beta1.SchemeGroupVersion).Encode
	differs := func(obj runtime.Object, w io.Writer) error {
		var b bytes.Buffer
		if err := pb(obj, &b); err != nil {
			return err
		}
		_, err := w.Write(bytes.ReplaceAll(b.Bytes(), []byte("memory"), []byte("memorx")))
		return err
	}
	j := newDirectLists()
	for i, n := range []int{0, 15, 15, 300} {
		es := labeledPodEntries(n)
		got, err := encodeList[storage.PodPoint](podKind{}, es, fmt.Sprint(i), created, "pb-differs", differs, j)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := differs(podKind{}.list(es, fmt.Sprint(i), created), &want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.data, want.Bytes()) {
			t.Errorf("list %d of %d pods: not the encoder's bytes", i, n)
		}
		got.done()
	}
	if v, _ := j.verdict("pb-differs"); !v.checked || v.direct {
		t.Errorf("verdict %+v, want checked and not direct", v)
	}
}
