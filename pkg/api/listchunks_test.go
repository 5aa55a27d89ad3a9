package api

import (
	"bytes"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// countingPods is the pod kind, recording the most items it made at once.
type countingPods struct {
	podKind
	most int
}

func (k *countingPods) list(es []entry[storage.PodPoint], rv string, created metav1.Time) runtime.Object {
	k.most = max(k.most, len(es))
	return k.podKind.list(es, rv, created)
}

// encoderFor is the codecs' encoder of mediaType (pretty: its pretty printer) at version gv.
func encoderFor(t testing.TB, mediaType string, pretty bool, gv schema.GroupVersion) runtime.Encoder {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	s := info.Serializer
	if pretty {
		s = info.PrettySerializer
	}
	return codecs.EncoderForVersion(s, gv)
}

// labeledPodEntries is n pods' entries of two containers, each pod labeled.
func labeledPodEntries(n int) []entry[storage.PodPoint] {
	es := make([]entry[storage.PodPoint], n)
	for i := range es {
		es[i] = entry[storage.PodPoint]{
			object: object{namespace: fmt.Sprintf("ns-%d", i%3), name: fmt.Sprintf("pod-%05d", i),
				labels: map[string]string{"app": fmt.Sprintf("app-%d", i%7), "tier": "backend"}},
			point: podPoint(storage.ContainerPoint{Name: "app", Usage: storageUsage(uint64(i)*1_000_003, uint64(i)<<20)},
				storage.ContainerPoint{Name: "sidecar", Usage: storageUsage(5_000_000, 20<<20)}),
		}
	}
	return es
}

// TestListEncodedByChunksAsAtOnce: a full list's encoding made by chunks is, byte for byte, the one made from every
// item at once, whatever the encoding (those other than compact JSON are made at once), version and size (chunk
// boundaries, an empty list).
func TestListEncodedByChunksAsAtOnce(t *testing.T) {
	created := metav1.NewTime(sampleTime)
	encoders := []struct {
		name   string
		enc    runtime.Encoder
		chunks bool // made by chunks, so never more than listChunk items at once
	}{
		{"json v1beta1", encoderFor(t, runtime.ContentTypeJSON, false, v1beta1.SchemeGroupVersion), true},
		{"json v1", encoderFor(t, runtime.ContentTypeJSON, false, schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1"}), true},
		{"pretty json", encoderFor(t, runtime.ContentTypeJSON, true, v1beta1.SchemeGroupVersion), false},
		{"yaml", encoderFor(t, runtime.ContentTypeYAML, false, v1beta1.SchemeGroupVersion), false},
		{"protobuf", encoderFor(t, runtime.ContentTypeProtobuf, false, v1beta1.SchemeGroupVersion), false},
	}
	for _, e := range encoders {
		for _, n := range []int{0, 1, listChunk, listChunk + 1, 2 * listChunk, 2*listChunk + 1, 1234} {
			es := labeledPodEntries(n)
			var want bytes.Buffer
			if err := e.enc.Encode(podKind{}.list(es, "42", created), &want); err != nil {
				t.Fatal(err)
			}
			k := &countingPods{}
			got, err := encodeByEncoder[storage.PodPoint](k, es, "42", created, e.enc.Encode)
			if err != nil {
				t.Fatalf("%s, %d pods: %v", e.name, n, err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%s, %d pods: by chunks %d bytes, at once %d; they differ", e.name, n, len(got), want.Len())
			}
			if bound := max(listChunk, map[bool]int{true: listChunk, false: n}[e.chunks]); k.most > bound {
				t.Errorf("%s, %d pods: made %d items at once, want at most %d", e.name, n, k.most, bound)
			}
		}
	}
}

// TestFullListJSONNeverMakesEveryItem: a request's JSON of a full list of 1,234 pods, through the kept list's
// CacheEncode as the apiserver encodes it, makes at most listChunk items at once (it made all 1,234 before), and
// is the JSON of the whole list.
func TestFullListJSONNeverMakesEveryItem(t *testing.T) {
	const n = 1234
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	m := &fakeMetrics{pods: map[string]storage.PodPoint{}}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("pod-%05d", i)
		_ = indexer.Add(podMeta("ns-a", name, map[string]string{"app": "web"}))
		m.pods["ns-a/"+name] = podPoint(storage.ContainerPoint{Name: "app", Usage: storageUsage(uint64(i)*1000, 1<<20)})
	}
	k := &countingPods{podKind: podKind{pods: cache.NewGenericLister(indexer, podResource)}}
	s := newMetricsREST[storage.PodPoint](m, k, newReaders(Deps{}))
	ctx, _ := withAnswerHold(genericapirequest.WithNamespace(asUser("alice"), metav1.NamespaceAll))
	obj, err := s.List(ctx, listOpts(t, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	enc := encoderFor(t, runtime.ContentTypeJSON, false, v1beta1.SchemeGroupVersion)
	var got bytes.Buffer
	if err := enc.Encode(obj, &got); err != nil {
		t.Fatal(err)
	}
	if k.most > listChunk {
		t.Errorf("made %d items at once for the JSON of %d pods, want at most %d", k.most, n, listChunk)
	}
	var want bytes.Buffer
	if err := enc.Encode(unshared(obj), &want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) || !bytes.Contains(got.Bytes(), []byte(`"name":"pod-01233"`)) {
		t.Errorf("the JSON of the kept list (%d bytes) is not the list's (%d bytes)", got.Len(), want.Len())
	}
}
