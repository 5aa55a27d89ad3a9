package scraper

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"testing"
)

// TestParseDecimalIsStrconv holds the fast path to strconv on the forms it takes and around its limits.
func TestParseDecimalIsStrconv(t *testing.T) {
	for _, in := range []string{
		"0", "-0", "+0", "1", "18.5", "18.500000001", "123456.789012345", "1.048576e+07", "1.5e+09", "1e22", "1e-22",
		"9.99999999999999e22", "123456789012345e-22", "999999999999999", "9999999999999999", "0.1", "0.3", "-2.5e-3",
		"1E5", "1e+5", "1e", "1e+", "1e123", "1.e5", ".5", "5.", "1..2", "1e5.5", "4.35", "2.675", "1.7976931348623157e308",
		"00000000000000012.5", "1e-5x", "-", "+", "",
	} {
		got, ok := parseDecimal([]byte(in))
		want, err := strconv.ParseFloat(in, 64)
		if ok && (err != nil || math.Float64bits(got) != math.Float64bits(want)) {
			t.Errorf("parseDecimal(%q) = %v, strconv %v (%v)", in, got, want, err)
		}
	}
}

func FuzzParseDecimal(f *testing.F) {
	for _, in := range []string{"18.500000001", "1.048576e+07", "-0.5e-3", "123456789012345"} {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := parseDecimal([]byte(in))
		want, err := strconv.ParseFloat(in, 64)
		if ok && (err != nil || math.Float64bits(got) != math.Float64bits(want)) {
			t.Errorf("parseDecimal(%q) = %v, strconv %v (%v)", in, got, want, err)
		}
	})
}

// TestSpecial8 holds the eight-byte scan of quoted strings to the byte classes: the lowest byte it marks is the
// first byte that is not cPlain.
func TestSpecial8(t *testing.T) {
	first := func(w [8]byte) int {
		for i, c := range w {
			if class[c]&cPlain == 0 {
				return i
			}
		}
		return 8
	}
	check := func(w [8]byte) {
		got := 8
		if m := special8(binary.LittleEndian.Uint64(w[:])); m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if want := first(w); got != want {
			t.Fatalf("special8(%q) marks byte %d, want %d", w, got, want)
		}
	}
	for c := range 256 {
		for at := range 8 {
			w := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			w[at] = byte(c)
			check(w)
			for other := range 256 { // a second byte after it must not hide it
				if at < 7 {
					w[at+1] = byte(other)
					check(w)
				}
			}
		}
	}
}
