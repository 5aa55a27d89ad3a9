package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestItemCounterAcrossWrites holds the load phase's completeness check to counting every item, however the
// stream is cut.
func TestItemCounterAcrossWrites(t *testing.T) {
	body := []byte(`{"kind":"PodMetricsList","items":[` + strings.Repeat(`{"metadata":{},"window":"15s","containers":[]},`, 37) + `]}`)
	for _, size := range []int{1, 2, 3, 7, 8, 9, 10, 64, len(body)} {
		c := &itemCounter{}
		for rest := body; len(rest) > 0; {
			n := min(size, len(rest))
			if w, err := c.Write(bytes.Clone(rest[:n])); w != n || err != nil {
				t.Fatalf("chunks of %d: Write = %d, %v", size, w, err)
			}
			rest = rest[n:]
		}
		if c.n != 37 {
			t.Errorf("chunks of %d: counted %d items, want 37", size, c.n)
		}
	}
}
