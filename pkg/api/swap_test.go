package api

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

func TestSwapIsServedOnlyWhenReported(t *testing.T) {
	base := storage.Usage{CPU: 250_000_000, Memory: 3 << 30}
	for _, tc := range []struct {
		name  string
		usage storage.Usage
		want  string // the usage as JSON
	}{
		{"not reported: no key, not 0", base, `{"cpu":"250m","memory":"3Gi"}`},
		{"zero is served as zero", base.WithSwap(0), `{"cpu":"250m","memory":"3Gi","swap":"0"}`},
		{"bytes, in binary units like memory", base.WithSwap(5 << 20), `{"cpu":"250m","memory":"3Gi","swap":"5Mi"}`},
		{"not whole mebibytes", base.WithSwap(1000), `{"cpu":"250m","memory":"3Gi","swap":"1k"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := v1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Usage: resourceList(tc.usage)}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `"usage":`+tc.want) {
				t.Errorf("node metrics %s, want usage %s", b, tc.want)
			}
		})
	}
}
