package realinstall

import (
	"bytes"
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// TestChartOnRealNode: the chart with tls.type=helm runs as a pod of the image built here; the aggregator
// verifies its certificate against the caBundle the chart wrote (no insecureSkipTLSVerify), through the Service's
// endpoints; kubectl top shows the node's truth, and a rollout restart fails no kubectl top.
func TestChartOnRealNode(t *testing.T) {
	needNode(t)
	ensureInstalled(t, chart)
	ctx := context.Background()
	secret, err := env.cp.Client.CoreV1().Secrets(systemNamespace).Get(ctx, "metrics-ring-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's certificate: %v", err)
	}
	if len(secret.Data["ca.crt"]) == 0 {
		t.Fatal("the chart's Secret has no ca.crt")
	}
	agg, err := aggregator.NewForConfig(env.cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range framework.APIServiceNames {
		a, err := agg.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Spec.InsecureSkipTLSVerify || !bytes.Equal(a.Spec.CABundle, secret.Data["ca.crt"]) {
			t.Errorf("APIService %s: insecureSkipTLSVerify %v, caBundle the Secret's ca.crt: %v; want verification against it",
				name, a.Spec.InsecureSkipTLSVerify, bytes.Equal(a.Spec.CABundle, secret.Data["ca.crt"]))
		}
	}
	topShowsTruth(t)
	rolloutKeepsServing(t)
}
