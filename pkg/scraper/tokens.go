package scraper

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"strconv"
	"unsafe"
)

// The tokens of the text format's lines, read as textparse reads them: quoted strings and their escapes, values
// and timestamps. Every scanner relies on the body ending with a newline, which no token may contain, so it stops
// at that newline at the latest.

// Why a line was lost. Static, so that a response of bad lines costs no allocation per line; the first error of a
// response is wrapped with its line number and text (parser.badLine).
var (
	errStart       = errors.New("expected a metric name, '{', '#' or a blank line")
	errLabelName   = errors.New("expected a label name or '}'")
	errEqual       = errors.New("expected '=' after a label name")
	errLabelValue  = errors.New(`expected a quoted label value after '='`)
	errQuoted      = errors.New("unterminated quoted string or a NUL byte in it")
	errUTF8        = errors.New("label value is not valid UTF-8")
	errNameTwice   = errors.New("metric name given twice")
	errNoName      = errors.New("series without a metric name")
	errDuplicate   = errors.New("label repeated (or an explicit __name__): the series is ambiguous")
	errValue       = errors.New("expected a value")
	errBadValue    = errors.New("value is not a number")
	errTimestamp   = errors.New("timestamp out of range")
	errEndOfSeries = errors.New("expected a timestamp or the end of the line")
	errType        = errors.New("invalid metric type")
	errHelp        = errors.New("help text is not valid UTF-8")
)

// quoted reads the quoted string starting at b[i] == '"' and returns the index after its closing quote, whether it
// holds escapes and whether it holds non-ASCII bytes. A raw newline or a NUL byte in it is an error (textparse
// accepts both in some places; the format requires a newline to be escaped, and no exporter writes either).
func quoted(b []byte, i int) (end int, escaped, nonASCII bool, err error) {
	for j := i + 1; ; j++ {
		// Eight bytes at a time while none of them needs attention: label values are names of 3 to 63 bytes.
		for j+8 <= len(b) {
			if m := special8(binary.LittleEndian.Uint64(b[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		c := b[j]
		if class[c]&cPlain != 0 {
			continue
		}
		switch {
		case c == '"':
			return j + 1, escaped, nonASCII, nil
		case c == '\\':
			// Any byte but a newline (and NUL) may follow; b[j+1] exists since b ends with a newline.
			j++
			if b[j] == '\n' || b[j] == 0 {
				return j, escaped, nonASCII, errQuoted
			}
			escaped, nonASCII = true, nonASCII || b[j] >= 0x80
		case c >= 0x80:
			nonASCII = true
		default: // NUL or newline
			return j, escaped, nonASCII, errQuoted
		}
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special8 has the high bit set in the lowest byte of x (little-endian) that is not cPlain: '"', '\\', a newline, a
// NUL or non-ASCII (higher bytes may be marked wrongly; only the lowest mark is used).
func special8(x uint64) uint64 {
	zero := func(v uint64) uint64 { return (v - ones) &^ v & highs }
	return zero(x^('"'*ones)) | zero(x^('\\'*ones)) | zero(x^('\n'*ones)) | zero(x) | x&highs
}

// unescape appends v to dst with the escapes \\, \" and \n resolved, as textparse's Labels does: a backslash before
// any other byte stays.
func unescape(dst, v []byte) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '\\', '"':
				c = v[i+1]
				i++
			case 'n':
				c = '\n'
				i++
			}
		}
		dst = append(dst, c)
	}
	return dst
}

// parseValue parses a sample value as textparse does: strconv.ParseFloat without hexadecimal floats or underscores.
func parseValue(tok []byte) (float64, error) {
	if v, ok := parseDecimal(tok); ok {
		return v, nil
	}
	for _, c := range tok {
		if c == 'p' || c == 'P' || c == '_' {
			return 0, errBadValue
		}
	}
	// The string does not outlive the call: strconv's errors copy it, and they are not returned anyway.
	v, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(tok), len(tok)), 64)
	if err != nil {
		return 0, errBadValue
	}
	return v, nil
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
	1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseDecimal parses the forms a kubelet writes ([-+]digits[.digits][e[-+]digits], at most 15 digits and a power
// of ten within 1e±22) without strconv's generality. The digits make an integer below 2^53 and the power of ten is
// exact, so the one multiplication or division rounds correctly: the result is strconv's (which takes the same
// fast path), as correct rounding is unique.
func parseDecimal(s []byte) (float64, bool) {
	i, neg := 0, false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		i, neg = 1, s[0] == '-'
	}
	var m uint64
	digits, point := 0, -1 // point: how many digits came before the decimal point, -1 without one
	for ; i < len(s); i++ {
		c := s[i]
		if '0' <= c && c <= '9' {
			m = m*10 + uint64(c-'0')
			digits++
		} else if c == '.' && point < 0 && digits > 0 {
			point = digits
		} else {
			break
		}
	}
	if digits == 0 || digits > 15 || point == digits {
		return 0, false
	}
	exp := 0
	if point >= 0 {
		exp = point - digits
	}
	if i < len(s) {
		// An exponent: e or E, an optional sign, one or two digits, and nothing after them.
		if s[i] != 'e' && s[i] != 'E' || i+1 == len(s) {
			return 0, false
		}
		i++
		eneg := s[i] == '-'
		if s[i] == '-' || s[i] == '+' {
			i++
		}
		e, n := 0, 0
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9' && n < 3; i++ {
			e, n = e*10+int(s[i]-'0'), n+1
		}
		if n == 0 || n == 3 || i < len(s) {
			return 0, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	f := float64(m)
	switch {
	case exp > 22 || exp < -22:
		return 0, false
	case exp > 0:
		f *= pow10[exp]
	case exp < 0:
		f /= pow10[-exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

// timestamp reads the digits at b[i] as a millisecond timestamp and returns the index after them.
func timestamp(b []byte, i int) (int64, int, error) {
	var v int64
	for ; '0' <= b[i] && b[i] <= '9'; i++ {
		d := int64(b[i] - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, i, errTimestamp
		}
		v = v*10 + d
	}
	return v, i, nil
}

func skipSpace(b []byte, i int) int {
	for b[i] == ' ' || b[i] == '\t' {
		i++
	}
	return i
}
