package api

import (
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantities are most of what an item's JSON writes, and Quantity's canonical form costs allocations per value
// (it rescales through a copy). The values served here are of two shapes only: nanocores as DecimalSI and bytes as
// BinarySI, from a uint64 (resourceList); their canonical forms are written here directly, following
// Quantity.CanonicalizeBytes, and any value outside what that covers plainly (one beyond int64) goes through
// Quantity itself. FuzzQuantityJSON compares the two.

// decimalSuffixes are DecimalSI's suffixes by exponent of ten, from -9 to 18 in steps of 3.
var decimalSuffixes = [...]string{"n", "u", "m", "", "k", "M", "G", "T", "P", "E"}

// binarySuffixes are BinarySI's suffixes by exponent of 1024.
var binarySuffixes = [...]string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}

// appendCPUJSON writes nanocores as uint64Quantity(nanocores, DecimalSI, -9) marshals.
func appendCPUJSON(b []byte, nanocores uint64, s *itemScratch) []byte {
	if nanocores > math.MaxInt64 {
		return appendQuantity(b, uint64Quantity(nanocores, resource.DecimalSI, -9), s)
	}
	if out, ok := appendDecimal(append(b, '"'), int64(nanocores), -9); ok {
		return append(out, '"')
	}
	return appendQuantity(b, uint64Quantity(nanocores, resource.DecimalSI, -9), s)
}

// appendBytesJSON writes bytes as uint64Quantity(bytes, BinarySI, 0) marshals: below 1,024 as DecimalSI; else a
// whole number of the largest power of 1,024 that divides it.
func appendBytesJSON(b []byte, bytes uint64, s *itemScratch) []byte {
	if bytes > math.MaxInt64 {
		return appendQuantity(b, uint64Quantity(bytes, resource.BinarySI, 0), s)
	}
	b = append(b, '"')
	if bytes < 1024 {
		out, _ := appendDecimal(b, int64(bytes), 0) // below 1,024: never overflows, exponent 0 or 3
		return append(out, '"')
	}
	amount, exp := int64(bytes), 0
	for amount >= 1024 && amount%1024 == 0 {
		amount /= 1024
		exp++
	}
	b = strconv.AppendInt(b, amount, 10)
	b = append(b, binarySuffixes[exp]...)
	return append(b, '"')
}

// appendDecimal writes value x 10^exp in DecimalSI canonical form: trailing zeros taken into the exponent, the
// exponent brought down to a multiple of 3, and its suffix. ok is false, with nothing written, when the mantissa
// would overflow or the exponent has no suffix.
func appendDecimal(b []byte, value int64, exp int) ([]byte, bool) {
	if value == 0 {
		return append(b, '0'), true
	}
	for value >= 10 && value%10 == 0 {
		value /= 10
		exp++
	}
	switch exp % 3 {
	case 1, -2:
		if value > math.MaxInt64/10 {
			return b, false
		}
		value, exp = value*10, exp-1
	case 2, -1:
		if value > math.MaxInt64/100 {
			return b, false
		}
		value, exp = value*100, exp-2
	}
	i := exp/3 + 3
	if i < 0 || i >= len(decimalSuffixes) {
		return b, false
	}
	b = strconv.AppendInt(b, value, 10)
	return append(b, decimalSuffixes[i]...), true
}
