package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// TestFullListKeptWithoutItems (issue 26 finding 1 (c)): a kept full list kept its built items, several times its
// JSON. With a reader cache above a list of every pod's entries and items but below those and its JSON, the first
// encoding's charge evicted the build: every list of all pods, whatever its selector, made the build, its items, a
// sort and an encoding again (5 lists, 5 builds). Below its items (and above its entries and JSON) the list was
// not kept at all: each request made the items and the encoding for itself (TestFullListItemsMadeOnce). Now lists
// of all pods of one snapshot through distinct all-matching selectors make one build at either budget, keep within
// it and answer the same bytes; a table, a metadata-only list and a protobuf list of that build are still right,
// its items made for them alone.
func TestFullListKeptWithoutItems(t *testing.T) {
	const pods = 3000
	entries, items, jsonBytes := leanSizes(t, pods)
	for _, tc := range []struct {
		name   string
		budget int64
	}{
		{"below its items", (entries + jsonBytes + items) / 2},
		{"below its items and JSON", entries + items + jsonBytes/2},
	} {
		t.Run(tc.name, func(t *testing.T) { fullListKept(t, pods, tc.budget) })
	}
}

// leanSizes are the keeper's estimates of the entries and items of a list of n pods of one container (podCluster),
// and its JSON's bytes.
func leanSizes(t *testing.T, n int) (entries, items, jsonBytes int64) {
	t.Helper()
	c := podCluster(t, n)
	s := newPodStorage(c.store, cache.NewGenericLister(c.pods, podResource), newReaders(Deps{}))
	obj, err := s.List(genericapirequest.WithNamespace(context.Background(), ""), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	data, err := runtime.Encode(codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	es := make([]entry[storage.PodPoint], n)
	for i := range es {
		es[i].point = storage.PodPoint{Names: []string{"c"}}
	}
	return entryBytes(es), listBytes(es), int64(len(data))
}

// podCluster is a cluster of n pods in ns-a, one collection of them at 100m each.
func podCluster(t *testing.T, n int) *cluster {
	c := newCluster(t)
	cpu := map[string]float64{}
	for i := range n {
		name := fmt.Sprintf("p%04d", i)
		c.addPod("ns-a", name)
		cpu["ns-a/"+name] = 0.1
	}
	c.cycle(nil, cpu)
	return c
}

func fullListKept(t *testing.T, pods int, budget int64) {
	c := podCluster(t, pods)
	ts := newTestServer(t, c.store, time.Unix(0, c.clock.Load()))
	ts.serve(t, Deps{Snapshots: c.store, Nodes: corelisters.NewNodeLister(c.nodes),
		Pods: cache.NewGenericLister(c.pods, podResource), ReaderCacheBytes: budget}, nil)
	registerMetrics()
	admin := ts.httpClient(t, "alice", []string{"system:masters"})

	before := buildsSoFar(t)
	var first string
	for i := range 5 {
		code, body := get(t, admin, ts.url+allPods(fmt.Sprint(i)), "application/json")
		switch {
		case code != 200:
			t.Fatalf("list %d: %d %s", i, code, trim(body))
		case i == 0:
			first = body
		case body != first:
			t.Errorf("list %d differs from the first (%d bytes, want %d)", i, len(body), len(first))
		}
	}
	var list v1beta1.PodMetricsList
	if err := json.Unmarshal([]byte(first), &list); err != nil || len(list.Items) != pods {
		t.Fatalf("the list: %d items, %v; want %d", len(list.Items), err, pods)
	}
	if n := buildsSoFar(t) - before; n != 1 {
		t.Errorf("5 JSON lists of all %d pods at one snapshot made %v builds, want 1", pods, n)
	}
	if held, err := testutil.GetGaugeMetricValue(buildsKeptBytes); err != nil || held > float64(budget) {
		t.Errorf("builds keep %.0f bytes (%v), want at most the budget %d", held, err, budget)
	}

	code, body := get(t, admin, ts.url+allPods("table"), "application/json;as=Table;g=meta.k8s.io;v=v1")
	var table metav1.Table
	if err := json.Unmarshal([]byte(body), &table); code != 200 || err != nil || len(table.Rows) != pods ||
		table.Rows[pods-1].Cells[0] != "p2999" || table.Rows[pods-1].Cells[1] != "100m" {
		t.Errorf("the table: %d, %v, %d rows, want %d (the last p2999 at 100m): %s", code, err, len(table.Rows),
			pods, trim(body))
	}
	code, body = get(t, admin, ts.url+allPods("meta"), "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	var partial metav1.PartialObjectMetadataList
	if err := json.Unmarshal([]byte(body), &partial); code != 200 || err != nil || len(partial.Items) != pods ||
		partial.Items[0].Name != "p0000" {
		t.Errorf("the metadata-only list: %d, %v, %d items, want %d: %s", code, err, len(partial.Items), pods, trim(body))
	}
	pb, err := ts.metricsClient(t, true).MetricsV1beta1().PodMetricses("").List(context.Background(),
		metav1.ListOptions{LabelSelector: "x!=protobuf"})
	if err != nil {
		t.Fatalf("the protobuf list: %v", err)
	}
	pb.TypeMeta = list.TypeMeta // the typed client clears it
	if !apiequality.Semantic.DeepEqual(pb, &list) {
		t.Errorf("the protobuf list differs from the JSON one: %d items, resourceVersion %q (JSON %q)", len(pb.Items),
			pb.ResourceVersion, list.ResourceVersion)
	}
	if code, again := get(t, admin, ts.url+allPods("again"), "application/json"); code != 200 || again != first {
		t.Errorf("a JSON list after the table and protobuf: %d, %d bytes, want the first's %d", code, len(again), len(first))
	}
	if n := buildsSoFar(t) - before; n != 1 {
		t.Errorf("lists of all pods at one snapshot in JSON, table, metadata and protobuf made %v builds, want 1", n)
	}
	if held, err := testutil.GetGaugeMetricValue(buildsKeptBytes); err != nil || held > float64(budget) {
		t.Errorf("builds keep %.0f bytes (%v) after two encodings, want at most the budget %d", held, err, budget)
	}
}

// TestFullListItemsMadeOnce (issue 26 finding 1 (c)): with a reader cache below a list of every pod's items but
// above its entries and JSON, the list was not kept: each of 5 JSON lists of all pods (distinct all-matching
// selectors, one shared build) made its 3,000 items and their encoding for itself. Now the items are made once, for
// the first encoding, and the others are served its bytes.
func TestFullListItemsMadeOnce(t *testing.T) {
	const pods = 3000
	entries, items, jsonBytes := leanSizes(t, pods)
	c := podCluster(t, pods)
	k := &hookedKind[storage.PodPoint]{kind: podKind{pods: cache.NewGenericLister(c.pods, podResource)}}
	s := newMetricsREST[storage.PodPoint](c.store, k, newReaders(Deps{ReaderCacheBytes: (entries + jsonBytes + items) / 2}))
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	enc := codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion)
	var first []byte
	for i := range 5 {
		ctx, hold := withAnswerHold(genericapirequest.WithNamespace(asUser("alice"), ""))
		sel, err := labels.Parse(fmt.Sprintf("x!=v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		obj, err := s.List(ctx, &metainternalversion.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := enc.Encode(obj, &buf); err != nil {
			t.Fatal(err)
		}
		hold.release()
		if i == 0 {
			first = buf.Bytes()
		} else if !bytes.Equal(buf.Bytes(), first) {
			t.Errorf("list %d differs from the first", i)
		}
	}
	if n := k.items.Load(); n != pods {
		t.Errorf("5 JSON lists of all %d pods of one build made %d items, want %d", pods, n, pods)
	}
}

// TestLeanEncodingWaitsForRoomOutsideTheLock (review MEDIUM): a request encoding a kept list in a format not yet
// made waited for room in the answer budget while it held the build's lock of encodings, up to the build wait (5 s).
// Alice, her share of --answer-bytes held by her stalled answers, asks the list in a second format; Bob, asking it
// in a third within 2 s, waited behind her and failed. Now a request takes its room before the lock: Bob is answered.
func TestLeanEncodingWaitsForRoomOutsideTheLock(t *testing.T) {
	const pods = 3000
	entries, items, jsonBytes := leanSizes(t, pods)
	es := make([]entry[storage.PodPoint], pods)
	for i := range es {
		es[i].point = storage.PodPoint{Names: []string{"c"}}
	}
	answer := answerBytes(es)
	c := podCluster(t, pods)
	s := newMetricsREST[storage.PodPoint](c.store, podKind{pods: cache.NewGenericLister(c.pods, podResource)},
		newReaders(Deps{ReaderCacheBytes: (entries + jsonBytes + items) / 2, AnswerBytes: 4 * answer}))
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	enc := codecs.EncoderForVersion(info.Serializer, v1beta1.SchemeGroupVersion)
	bounded, cancel := context.WithTimeout(context.Background(), time.Minute) // bounds every wait below
	defer cancel()
	list := func(ctx context.Context, name string, i int) (runtime.CacheableObject, *answerHold) {
		t.Helper()
		rctx, hold := withAnswerHold(genericapirequest.WithNamespace(genericapirequest.WithUser(ctx,
			&user.DefaultInfo{Name: name}), ""))
		sel, err := labels.Parse(fmt.Sprintf("x!=v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		obj, err := s.List(rctx, &metainternalversion.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatalf("%s's list: %v", name, err)
		}
		return obj.(runtime.CacheableObject), hold
	}
	encode := func(obj runtime.CacheableObject, id string) ([]byte, error) {
		var buf bytes.Buffer
		err := obj.CacheEncode(runtime.Identifier(id), enc.Encode, &buf)
		return buf.Bytes(), err
	}

	first, hold := list(bounded, "alice", 0)
	want, err := encode(first, "json")
	if err != nil {
		t.Fatal(err)
	}
	hold.release()
	stalled, stalledHold := held("alice") // alice's stalled readers hold her share
	defer stalledHold.release()
	if err := s.answers.take(stalled, 4*answer/answerUserParts, true); err != nil {
		t.Fatal(err)
	}

	aliceCtx, aliceCancel := context.WithCancel(bounded)
	defer aliceCancel()
	alices, aliceHold := list(aliceCtx, "alice", 1)
	defer aliceHold.release()
	aliceDone := make(chan error, 1)
	go func() {
		_, err := encode(alices, "second")
		aliceDone <- err
	}()
	for waiting := 0; waiting == 0; {
		select {
		case err := <-aliceDone:
			t.Fatalf("alice's second format, her share held: %v, want a wait for room", err)
		case <-bounded.Done():
			t.Fatal("alice never waited for room")
		case <-time.After(time.Millisecond):
		}
		s.answers.mu.Lock()
		waiting = s.answers.waiting["alice"]
		s.answers.mu.Unlock()
	}

	bobCtx, bobCancel := context.WithTimeout(bounded, 2*time.Second)
	defer bobCancel()
	bobs, bobHold := list(bobCtx, "bob", 2)
	defer bobHold.release()
	if got, err := encode(bobs, "third"); err != nil || !bytes.Equal(got, want) {
		t.Errorf("bob's third format while alice waits for room: %d bytes, %v; want the list's %d bytes", len(got),
			err, len(want))
	}
	aliceCancel()
	if err := <-aliceDone; err == nil {
		t.Error("alice's second format, her share held and her request gone: answered, want an error")
	}
}
