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
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// itemCountingPods is the pod kind, counting the items it made.
type itemCountingPods struct {
	podKind
	made int
}

func (k *itemCountingPods) list(es []entry[storage.PodPoint], rv string, created metav1.Time) runtime.Object {
	k.made += len(es)
	return k.podKind.list(es, rv, created)
}

// TestListsWrittenDirectlyOnceAnEncoderAgrees: a compact JSON or protobuf encoder's lists are written from the
// entries, with no item made, once its first list with items compared equal; every answer is the encoder's bytes.
// Other formats (pretty JSON, YAML), and a JSON encoder whose items differ from the written ones, keep making
// items and encoding them.
func TestListsWrittenDirectlyOnceAnEncoderAgrees(t *testing.T) {
	registerMetrics()
	created := metav1.NewTime(sampleTime)
	jsonEnc := encoderFor(t, runtime.ContentTypeJSON, false, v1beta1.SchemeGroupVersion).Encode
	// differs is compact JSON whose items are not the written ones (a field renamed), as an apiserver whose
	// encoder changed would write.
	differs := func(obj runtime.Object, w io.Writer) error {
		var b bytes.Buffer
		if err := jsonEnc(obj, &b); err != nil {
			return err
		}
		_, err := w.Write(bytes.ReplaceAll(b.Bytes(), []byte(`"window":`), []byte(`"windowSeconds":`)))
		return err
	}
	cases := []struct {
		name   string
		encode encodeFunc
		writes bool
	}{
		{"json", jsonEnc, true},
		{"json v1", encoderFor(t, runtime.ContentTypeJSON, false, schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1"}).Encode, true},
		{"pretty json", encoderFor(t, runtime.ContentTypeJSON, true, v1beta1.SchemeGroupVersion).Encode, false},
		{"yaml", encoderFor(t, runtime.ContentTypeYAML, false, v1beta1.SchemeGroupVersion).Encode, false},
		{"protobuf", encoderFor(t, runtime.ContentTypeProtobuf, false, v1beta1.SchemeGroupVersion).Encode, true},
		{"json that differs", differs, false},
	}
	for _, c := range cases {
		j := newDirectLists()
		id := runtime.Identifier(c.name)
		for i, n := range []int{0, 15, 15, 1234, 15} {
			k := &itemCountingPods{}
			es := labeledPodEntries(n)
			rv := fmt.Sprint(40 + i)
			written0, _ := testutil.GetCounterMetricValue(listEncodings.WithLabelValues("direct"))
			got, err := encodeList[storage.PodPoint](k, es, rv, created, id, c.encode, j)
			if err != nil {
				t.Fatalf("%s, list %d: %v", c.name, i, err)
			}
			var want bytes.Buffer
			if err := c.encode(podKind{}.list(es, rv, created), &want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.data, want.Bytes()) {
				t.Errorf("%s, list %d of %d pods: not the encoder's bytes", c.name, i, n)
			}
			got.done()
			// The first list (empty) compares nothing; the second is the first with items, encoded and compared.
			written1, _ := testutil.GetCounterMetricValue(listEncodings.WithLabelValues("direct"))
			wantWritten := c.writes && i >= 2
			if (k.made == 0) != (wantWritten || n == 0) || (written1-written0 == 1) != wantWritten {
				t.Errorf("%s, list %d of %d pods: %d items made, %v lists written; want written %v", c.name, i, n,
					k.made, written1-written0, wantWritten)
			}
		}
	}
}

// bulkyLabels is n labels near the largest key and value validation lets a pod have (a 244-character prefix, a
// 63-character name, a 63-character value): about 380 bytes of JSON each.
func bulkyLabels(n int) map[string]string {
	prefix := strings.Repeat("p", 230)
	m := map[string]string{}
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("%s%06d.example/%063d", prefix, i, i)] = fmt.Sprintf("%063d", i)
	}
	return m
}

// TestDirectListAllocatesAboutItsSize (the review's): a user who may create pods gives the first pod of a list a
// few hundred labels; writing the list directly allocates about the list, not the first item's size times the
// number of pods (212x the list before: 162 MB for 0.76 MB).
func TestDirectListAllocatesAboutItsSize(t *testing.T) {
	created := metav1.NewTime(sampleTime)
	enc := encoderFor(t, runtime.ContentTypeJSON, false, v1beta1.SchemeGroupVersion).Encode
	j := newDirectLists()
	if _, err := encodeList[storage.PodPoint](podKind{}, labeledPodEntries(3), "41", created, "json", enc, j); err != nil {
		t.Fatal(err)
	}
	es := labeledPodEntries(2000)
	es[0].labels = bulkyLabels(200) // about 75 KB of labels on one pod of 2,000
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	out, err := encodeList[storage.PodPoint](podKind{}, es, "42", created, "json", enc, j)
	goruntime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if allocated, limit := after.TotalAlloc-before.TotalAlloc, 4*uint64(len(out.data))+1<<20; allocated > limit {
		t.Errorf("writing a list of %d bytes allocated %d bytes (%.0fx), more than %d", len(out.data), allocated,
			float64(allocated)/float64(len(out.data)), limit)
	}
}

// TestDirectListsConcurrently (the review's): lists of several resourceVersions written at once through one
// directLists are each the encoder's bytes (run with -race).
func TestDirectListsConcurrently(t *testing.T) {
	created := metav1.NewTime(sampleTime)
	enc := encoderFor(t, runtime.ContentTypeJSON, false, v1beta1.SchemeGroupVersion).Encode
	j := newDirectLists()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for i := 0; i < 30; i++ {
				es := labeledPodEntries(1 + (g+i)%40)
				rv := fmt.Sprint(i % 3)
				got, err := encodeList[storage.PodPoint](podKind{}, es, rv, created, "json", enc, j)
				if err != nil {
					t.Error(err)
					return
				}
				var want bytes.Buffer
				if err := enc(podKind{}.list(es, rv, created), &want); err != nil {
					t.Error(err)
					return
				}
				same := bytes.Equal(got.data, want.Bytes())
				got.done()
				if !same {
					t.Errorf("goroutine %d, list %d: not the encoder's bytes", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
}
