package storage

import (
	"math"
	"strings"
	"testing"
	"time"
)

// withSwap gives a sample a swap value, as a source that reports swap does.
func withSwap(c ContainerSample, swap float64) ContainerSample {
	c.Swap, c.HasSwap = swap, true
	return c
}

func TestSwap(t *testing.T) {
	type want struct {
		swap    uint64
		hasSwap bool
		invalid int
	}
	cases := []struct {
		name  string
		first ContainerSample // at 0
		next  ContainerSample // at 15 s
		want  want
	}{
		{name: "not reported: no swap, not zero",
			first: ctr("p", "app", 0, -time.Hour, 1, 1e6),
			next:  ctr("p", "app", 15*time.Second, -time.Hour, 2, 1e6)},
		{name: "zero is a true value",
			first: withSwap(ctr("p", "app", 0, -time.Hour, 1, 1e6), 0),
			next:  withSwap(ctr("p", "app", 15*time.Second, -time.Hour, 2, 1e6), 0),
			want:  want{swap: 0, hasSwap: true}},
		{name: "the newest sample's value is served",
			first: withSwap(ctr("p", "app", 0, -time.Hour, 1, 1e6), 1<<20),
			next:  withSwap(ctr("p", "app", 15*time.Second, -time.Hour, 2, 1e6), 3<<20),
			want:  want{swap: 3 << 20, hasSwap: true}},
		{name: "a source that stops reporting swap serves none",
			first: withSwap(ctr("p", "app", 0, -time.Hour, 1, 1e6), 1<<20),
			next:  ctr("p", "app", 15*time.Second, -time.Hour, 2, 1e6)},
		{name: "NaN swap loses the swap alone",
			first: withSwap(ctr("p", "app", 0, -time.Hour, 1, 1e6), 1<<20),
			next:  withSwap(ctr("p", "app", 15*time.Second, -time.Hour, 2, 1e6), math.NaN()),
			want:  want{invalid: 1}},
		{name: "negative swap loses the swap alone",
			first: withSwap(ctr("p", "app", 0, -time.Hour, 1, 1e6), 1<<20),
			next:  withSwap(ctr("p", "app", 15*time.Second, -time.Hour, 2, 1e6), -1),
			want:  want{invalid: 1}},
		{name: "infinite swap loses the swap alone",
			first: withSwap(ctr("p", "app", 0, -time.Hour, 1, 1e6), 1<<20),
			next:  withSwap(ctr("p", "app", 15*time.Second, -time.Hour, 2, 1e6), math.Inf(1)),
			want:  want{invalid: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(Options{})
			f.bind("p")
			f.scrape(0, []NodeSample{{Node: "n1", Sample: tc.first.Sample}}, []ContainerSample{tc.first})
			n := tc.next
			rej := f.scrape(15*time.Second, []NodeSample{{Node: "n1", Sample: n.Sample}}, []ContainerSample{n})
			// The node and the container sample are the same values: each counts.
			if rej.InvalidSwap != 2*tc.want.invalid || rej.Invalid != 0 || rej.Zero != 0 {
				t.Errorf("rejection = %+v, want %d invalid swap values only", rej, 2*tc.want.invalid)
			}
			if tc.want.invalid > 0 && (!strings.Contains(rej.Example, "swap=") || rej.Total() == 0) {
				t.Errorf("rejection = %+v: the example should show the swap value and Total count it", rej)
			}
			p, ok := f.Pod("ns", "p")
			if !ok || len(p.Containers()) != 1 {
				t.Fatalf("pod not served (an invalid swap must not lose CPU and memory): %+v %v", p, ok)
			}
			u := p.Containers()[0].Usage
			if u.CPU != 66_666_667 || u.Memory != 1e6 {
				t.Errorf("cpu, memory = %d, %d, want 66666667, 1000000", u.CPU, u.Memory)
			}
			if swap, has := u.Swap(); swap != tc.want.swap || has != tc.want.hasSwap {
				t.Errorf("container swap = %d, %v, want %d, %v", swap, has, tc.want.swap, tc.want.hasSwap)
			}
			n1, ok := f.Node("n1")
			if swap, has := n1.Swap(); !ok || swap != tc.want.swap || has != tc.want.hasSwap {
				t.Errorf("node swap = %d, %v (served %v), want %d, %v", swap, has, ok, tc.want.swap, tc.want.hasSwap)
			}
		})
	}
}

func TestUsageSwapZeroValueHasNone(t *testing.T) {
	if _, ok := (Usage{CPU: 1, Memory: 1}).Swap(); ok {
		t.Error("a Usage without WithSwap has a swap value")
	}
	for _, v := range []uint64{0, 1, 1 << 40, math.MaxUint64} {
		got, ok := Usage{}.WithSwap(v).Swap()
		if want := min(v, math.MaxUint64-1); !ok || got != want {
			t.Errorf("WithSwap(%d).Swap() = %d, %v, want %d, true", v, got, ok, want)
		}
	}
}
