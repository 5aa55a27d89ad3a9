package api

import (
	"bytes"
	"fmt"
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

// heldWriter is a client's connection as the server writes to it: what it was given, and the most memory a write
// held while it lasted (the capacity behind the bytes, which a client that does not read keeps until the write
// deadline).
type heldWriter struct {
	bytes.Buffer
	held int
}

func (w *heldWriter) Write(p []byte) (int, error) {
	w.held = max(w.held, cap(p))
	return w.Buffer.Write(p)
}

// TestFirstReaderHoldsNoMoreThanASmallAnswer: an answer estimated under smallAnswer takes nothing from the answer
// budget, as it holds little while it is written. The first reader of a small list is written from a pooled
// buffer; the pool also holds buffers grown by lists of up to pooledListBytes, so a reader that stalls its
// connection (HTTP/2 flow control) held up to pooledListBytes for a list of a few kilobytes, outside the budget.
func TestFirstReaderHoldsNoMoreThanASmallAnswer(t *testing.T) {
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
	enc := codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion)
	list := func(selector string, w *heldWriter) *leanList[storage.PodPoint] {
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
	}
	// The pool as a server that also serves lists of a few hundred pods has it: buffers they grew.
	newBuffer := listBuffers.New
	t.Cleanup(func() { listBuffers.New = newBuffer; goruntime.GC(); goruntime.GC() })
	listBuffers.New = func() any { b := make([]byte, 0, pooledListBytes); return &b }
	goruntime.GC()
	goruntime.GC()                  // empties the pool (its victims too): buffers come from New
	list("app=warm", &heldWriter{}) // the encoder's first list with items is compared with the one written directly
	var w heldWriter
	l := list("app=hpa", &w)
	estimate := answerBytes(l.core.b.entries)
	if estimate >= smallAnswer {
		t.Fatalf("the list's estimate is %d bytes, not a small answer", estimate)
	}
	if w.held > smallAnswer {
		t.Errorf("the first reader of a list of %d bytes (estimated %d) held %d bytes while written, more than a "+
			"small answer (%d)", w.Len(), estimate, w.held, smallAnswer)
	}
}
