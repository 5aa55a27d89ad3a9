package api

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// BenchmarkListEncoding makes the JSON and the protobuf of a list of 15 pods (an HPA's selection) and of 30,000 (every
// pod at 1,000 nodes), each of two containers: by the apiserver's encoder from items made for it (as before), and
// written directly from the entries, either for one reader (direct: a small list's pooled buffer given back once
// written) or to be kept (direct/kept: copied out of it, as every list was before a small one's first reader was
// written from its buffer).
func BenchmarkListEncoding(b *testing.B) {
	created := metav1.NewTime(sampleTime)
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		enc := encoderFor(b, mediaType, false, v1beta1.SchemeGroupVersion).Encode
		for _, n := range []int{15, 30000} {
			es := labeledPodEntries(n)
			b.Run(fmt.Sprintf("%s/%d/encoder", mediaType, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := encodeByEncoder[storage.PodPoint](podKind{}, es, "42", created, enc); err != nil {
						b.Fatal(err)
					}
				}
			})
			for _, keep := range []bool{false, true} {
				name := map[bool]string{false: "direct", true: "direct/kept"}[keep]
				b.Run(fmt.Sprintf("%s/%d/%s", mediaType, n, name), func(b *testing.B) {
					j := newDirectLists()
					if _, err := encodeList[storage.PodPoint](podKind{}, es, "41", created, "id", enc, j); err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for b.Loop() {
						out, err := encodeList[storage.PodPoint](podKind{}, es, "42", created, "id", enc, j)
						if err != nil {
							b.Fatal(err)
						}
						if keep {
							_ = out.kept()
						} else {
							out.done()
						}
					}
				})
			}
		}
	}
}
