package realnode

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

// kubeletReader reads the real kubelet's /metrics/resource, the endpoint metrics-ring scrapes, as a cluster
// admin (the kubelet authorizes through the apiserver's SubjectAccessReview).
type kubeletReader struct {
	url string
	hc  *http.Client
}

func newKubeletReader(cp *framework.ControlPlane, n *framework.RealNode) (*kubeletReader, error) {
	_, cfg, err := cp.UserKubeconfig("realnode-reader", "system:masters")
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(n.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the kubelet's CA: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.TLSClientConfig.CAData = ca
	cfg.TLSClientConfig.ServerName = n.Name
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet client: %w", err)
	}
	return &kubeletReader{
		url: "https://" + net.JoinHostPort(n.IP, strconv.Itoa(n.Port)) + "/metrics/resource",
		hc:  &http.Client{Transport: rt, Timeout: 10 * time.Second},
	}, nil
}

// containerSample is one container's values in one kubelet response, with the sample's own time.
type containerSample struct {
	cpuSeconds float64
	workingSet uint64
	// cpuTime and memTime are the kubelet's timestamps of the two values (cAdvisor's read of the cgroup).
	cpuTime, memTime time.Time
}

// containers returns every container's values, keyed by namespace/pod/container.
func (k *kubeletReader) containers(ctx context.Context) (map[string]containerSample, error) {
	body, err := k.get(ctx)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", k.url, err)
	}
	out := map[string]containerSample{}
	for name, f := range families {
		if name != "container_cpu_usage_seconds_total" && name != "container_memory_working_set_bytes" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			key := labels["namespace"] + "/" + labels["pod"] + "/" + labels["container"]
			s := out[key]
			ts := model.Time(m.GetTimestampMs()).Time()
			if name == "container_cpu_usage_seconds_total" {
				s.cpuSeconds, s.cpuTime = m.GetCounter().GetValue(), ts
			} else {
				s.workingSet, s.memTime = uint64(m.GetGauge().GetValue()), ts
			}
			out[key] = s
		}
	}
	return out, nil
}

// key is how containers keys a container.
func key(pod, container string) string { return strings.Join([]string{namespace, pod, container}, "/") }

// podLines are the raw lines of /metrics/resource about the pod's containers (CPU, memory and start time), as
// the kubelet wrote them: two containers under one name show as two lines of a series.
func (k *kubeletReader) podLines(ctx context.Context, pod string) ([]string, error) {
	r, err := k.get(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", k.url, err)
	}
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "container_") && strings.Contains(l, `pod="`+pod+`"`) && strings.Contains(l, `namespace="`+namespace+`"`) {
			out = append(out, l)
		}
	}
	return out, nil
}

// get is the body of one GET of /metrics/resource, or an error naming the URL and the status when it is not 200.
func (k *kubeletReader) get(ctx context.Context) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", k.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: status %d", k.url, resp.StatusCode)
	}
	return resp.Body, nil
}
