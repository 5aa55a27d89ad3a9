package api

import (
	"bytes"
	"fmt"
	"io"
	goruntime "runtime"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// twoWorkloads is a namespace of 30 pods, half labeled app=warm and half app=hpa, after one collection, read
// through the pods' REST storage: list lists a selection as an HPA would and encodes it into w as compact JSON by
// enc, and returns it.
func twoWorkloads(t *testing.T) (list func(selector string, w io.Writer) *leanList[storage.PodPoint], enc runtime.Encoder) {
	c := newCluster(t)
	cpu := map[string]float64{}
	for i := range 30 {
		name := fmt.Sprintf("p%04d", i)
		_ = c.pods.Add(podMeta("ns-a", name, map[string]string{"app": []string{"warm", "hpa"}[i%2]}))
		c.store.PodBound("ns-a", name, "node-a")
		cpu["ns-a/"+name] = 0.1
	}
	c.cycle(nil, cpu)
	s := newMetricsREST[storage.PodPoint](c.store, podKind{pods: cache.NewGenericLister(c.pods, podResource)},
		newReaders(Deps{ReaderCacheBytes: 64 << 20}))
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	enc = codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion)
	return func(selector string, w io.Writer) *leanList[storage.PodPoint] {
		t.Helper()
		ctx, hold := withAnswerHold(genericapirequest.WithNamespace(asUser("hpa"), "ns-a"))
		defer hold.release()
		sel, err := labels.Parse(selector)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := s.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(obj, w); err != nil {
			t.Fatal(err)
		}
		l, ok := obj.(*leanList[storage.PodPoint])
		if !ok {
			t.Fatalf("the list of %q is a %T", selector, obj)
		}
		return l
	}, enc
}

// TestSmallListKeptFromItsSecondReader: an HPA reads its pods' list once a build, and every such list's encoding
// was copied out of its pooled buffer and kept with the build, a fifth of what the server allocated under the HPA
// fleet (BENCHMARKS.md). Now a list small enough for a pooled buffer is written from it to its first reader and
// kept only from its second reader on, so that readers repeating a selection still share one encoding; every
// reader gets the encoder's bytes.
func TestSmallListKeptFromItsSecondReader(t *testing.T) {
	// An empty pool, so that its buffers are New's: one grown by another test's long list is too large to be lent
	// to a small answer's reader (TestFirstReaderHoldsNoMoreThanASmallAnswer).
	goruntime.GC()
	goruntime.GC()
	list, enc := twoWorkloads(t)
	list("app=warm", io.Discard) // the encoder's first list with items is compared with the one written directly, and kept
	for i, wantKept := range []int{0, 1, 1} {
		var got bytes.Buffer
		l := list("app=hpa", &got)
		var want bytes.Buffer
		b := l.core.b
		if err := enc.Encode(b.res.kind.list(b.entries, b.rv, b.created), &want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("reader %d: not the encoder's bytes:\n%s\nwant\n%s", i+1, got.Bytes(), want.Bytes())
		}
		l.core.mu.Lock()
		kept := len(l.core.byID)
		l.core.mu.Unlock()
		if kept != wantKept {
			t.Errorf("after reader %d, the build keeps %d encodings, want %d", i+1, kept, wantKept)
		}
	}
}
