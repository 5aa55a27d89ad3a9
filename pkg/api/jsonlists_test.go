package api

import (
	"bytes"
	"fmt"
	"io"
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

// TestJSONListsWrittenOnceAnEncoderAgrees: a compact JSON encoder's lists are written from the entries, with no
// item made, once its first list with items compared equal; every answer is the encoder's bytes. Other formats,
// and a JSON encoder whose items differ from the written ones, keep making items and encoding them.
func TestJSONListsWrittenOnceAnEncoderAgrees(t *testing.T) {
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
		{"protobuf", encoderFor(t, runtime.ContentTypeProtobuf, false, v1beta1.SchemeGroupVersion).Encode, false},
		{"json that differs", differs, false},
	}
	for _, c := range cases {
		j := newJSONLists()
		id := runtime.Identifier(c.name)
		for i, n := range []int{0, 15, 15, 1234, 15} {
			k := &itemCountingPods{}
			es := labeledPodEntries(n)
			rv := fmt.Sprint(40 + i)
			written0, _ := testutil.GetCounterMetricValue(listEncodings.WithLabelValues("written"))
			got, err := encodeList[storage.PodPoint](k, es, rv, created, id, c.encode, j)
			if err != nil {
				t.Fatalf("%s, list %d: %v", c.name, i, err)
			}
			var want bytes.Buffer
			if err := c.encode(podKind{}.list(es, rv, created), &want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%s, list %d of %d pods: not the encoder's bytes", c.name, i, n)
			}
			// The first list (empty) compares nothing; the second is the first with items, encoded and compared.
			written1, _ := testutil.GetCounterMetricValue(listEncodings.WithLabelValues("written"))
			wantWritten := c.writes && i >= 2
			if (k.made == 0) != (wantWritten || n == 0) || (written1-written0 == 1) != wantWritten {
				t.Errorf("%s, list %d of %d pods: %d items made, %v lists written; want written %v", c.name, i, n,
					k.made, written1-written0, wantWritten)
			}
		}
	}
}
