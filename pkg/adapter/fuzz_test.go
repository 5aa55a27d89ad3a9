package adapter

import (
	"bytes"
	"testing"
)

// FuzzResponse feeds arbitrary bytes through what a Prometheus answer goes through: decoding, then mapping to
// nodes and containers. It must never panic, and whatever it maps must name its object.
func FuzzResponse(f *testing.F) {
	for _, seed := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"ns","pod":"p","container":"app","node":"n"},"value":[1795262400.123,"0.25"]}]}}`,
		`{"status":"success","warnings":["partial"],"data":{"resultType":"vector","result":[{"metric":{"namespace":"ns","pod":"p","container":"app"},"value":[1,"NaN"]},{"metric":{"namespace":"ns","pod":"p","container":"app"},"value":[1,"+Inf"]}]}}`,
		`{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`,
		`{"status":"success","data":{"resultType":"matrix","result":[]}}`,
		`<html>502 Bad Gateway</html>`,
	} {
		f.Add([]byte(seed))
	}
	q, err := compile(defaultRules())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		vec, _, err := decode(bytes.NewReader(body), 200)
		if err != nil {
			return
		}
		var sk skipped
		for _, c := range mapContainers(vec, vec, vec, &q.containerCPU, &q.containerMemory, q.containerSwap, &sk) {
			if c.Namespace == "" || c.Pod == "" || c.Container == "" {
				t.Fatalf("mapped a container without a name: %+v", c)
			}
		}
		for _, n := range mapNodes(vec, vec, vec, &q.nodeCPU, &q.nodeMemory, q.nodeSwap, &sk) {
			if n.Node == "" {
				t.Fatalf("mapped a node without a name: %+v", n)
			}
		}
	})
}
