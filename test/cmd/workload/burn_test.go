package main

import (
	"math"
	"testing"
)

// TestNextScale: the burners' factor moves toward the load asked (halfway, in ratio) when the process used more or
// less, stays within [1/4, 4], and holds when nothing was asked or measured.
func TestNextScale(t *testing.T) {
	cases := []struct {
		name           string
		f, asked, used float64
		want           float64
	}{
		{"on target", 1, 50, 50, 1},
		{"61m for 50m asked: spin less", 1, 50, 61, math.Sqrt(50.0 / 61)},
		{"half of it: spin more", 1, 100, 50, math.Sqrt2},
		{"from a factor already moved", 0.8, 50, 40, 0.8 * math.Sqrt(50.0/40)},
		{"bounded below", 0.3, 50, 5000, 0.25},
		{"bounded above", 3.9, 1000, 10, 4},
		{"nothing asked", 0.7, 0, 30, 0.7},
		{"nothing measured", 0.7, 50, 0, 0.7},
		{"a broken measure", 0.7, 50, math.Inf(1), 0.7},
	}
	for _, c := range cases {
		if got := nextScale(c.f, c.asked, c.used); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: nextScale(%v, %v, %v) = %v, want %v", c.name, c.f, c.asked, c.used, got, c.want)
		}
	}
}
