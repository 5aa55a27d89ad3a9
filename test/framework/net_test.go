package framework

import "testing"

// FreePorts gives distinct ports: processes started with them (a Thanos Query's HTTP and gRPC addresses, etcd's
// client and peer URLs) must not be handed one port twice.
func TestFreePortsDistinct(t *testing.T) {
	ports, err := FreePorts(64, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p == 0 || seen[p] {
			t.Fatalf("ports %v: %d given twice or zero", ports, p)
		}
		seen[p] = true
	}
}
