package api

import (
	"bytes"
	"net/url"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/metrics/testutil"
)

// TestServedListsAreTheEncoders: through the real server, JSON and protobuf lists of both versions, after each
// encoder's first, are written from the selections (list_encodings_total{by="direct"} counts them), and every
// answer is byte for byte what the server's own codecs write for the objects it decodes to.
func TestServedListsAreTheEncoders(t *testing.T) {
	ts := startTestServer(t)
	admin := ts.httpClient(t, "alice", []string{"system:masters"})
	written0, _ := testutil.GetCounterMetricValue(listEncodings.WithLabelValues("direct"))
	for _, c := range []struct{ version, mediaType string }{{"v1", runtime.ContentTypeJSON}, {"v1beta1", runtime.ContentTypeJSON},
		{"v1", runtime.ContentTypeProtobuf}, {"v1beta1", runtime.ContentTypeProtobuf}} {
		v := c.version
		enc := encoderFor(t, c.mediaType, false, schema.GroupVersion{Group: "metrics.k8s.io", Version: v})
		api := "/apis/metrics.k8s.io/" + v
		// Each path a build of its own: the first is its encoder's first list, the others are written.
		for _, path := range []string{api + "/pods", api + "/pods?labelSelector=" + url.QueryEscape("app in (web,db)"),
			api + "/namespaces/ns-a/pods", api + "/pods?labelSelector=app%3Ddb", api + "/nodes", api + "/nodes?labelSelector=role"} {
			code, body := get(t, admin, ts.url+path, c.mediaType)
			if code != 200 {
				t.Fatalf("GET %s: %d %s", path, code, trim(body))
			}
			obj, _, err := codecs.UniversalDeserializer().Decode([]byte(body), nil, nil)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			var want bytes.Buffer
			if err := enc.Encode(obj, &want); err != nil {
				t.Fatal(err)
			}
			if body != want.String() {
				t.Errorf("GET %s as %s:\n%q\nre-encoded:\n%q", path, c.mediaType, body, want.String())
			}
		}
	}
	written, _ := testutil.GetCounterMetricValue(listEncodings.WithLabelValues("direct"))
	// Per version and format, the pod lists after its encoder's first are written (lists of the same pods share a
	// build).
	if got := written - written0; got < 4 {
		t.Errorf("%v lists written from their selections, want at least one per version and format", got)
	}
}
