package scraper

import "bytes"

// seriesRef is what parse needs of one series: its metric name and the container labels, as slices of the body.
// Values containing escapes are unescaped into fresh memory (Kubernetes names never contain them).
type seriesRef struct {
	name, namespace, pod, container []byte
}

// scanSeries reads the series bytes that textparse's Series returns (`name{l="v",...}` or the UTF-8 form
// `{"name",l="v"}`) without allocating. textparse has validated them already, but scanSeries checks every bound
// itself so that no input can make it panic; ok is false when it does not understand the series.
func scanSeries(s []byte) (r seriesRef, ok bool) {
	i := bytes.IndexByte(s, '{')
	if i < 0 {
		r.name = bytes.TrimSpace(s)
		return r, len(r.name) > 0
	}
	r.name = bytes.TrimSpace(s[:i])
	i++
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return r, false
		}
		if s[i] == '}' {
			return r, len(r.name) > 0
		}
		var tok []byte
		quoted := s[i] == '"'
		if quoted {
			tok, i, ok = quotedString(s, i)
			if !ok {
				return r, false
			}
		} else {
			j := i
			for j < len(s) && isLabelChar(s[j]) {
				j++
			}
			if j == i {
				return r, false
			}
			tok, i = s[i:j], j
		}
		i = skipSpace(s, i)
		if i >= len(s) {
			return r, false
		}
		switch s[i] {
		case '=':
			i = skipSpace(s, i+1)
			var val []byte
			if val, i, ok = quotedString(s, i); !ok {
				return r, false
			}
			switch string(tok) {
			case "namespace":
				r.namespace = val
			case "pod":
				r.pod = val
			case "container":
				r.container = val
			}
		case ',', '}':
			if !quoted || len(r.name) > 0 {
				return r, false
			}
			r.name = tok // the UTF-8 form: a quoted metric name inside the braces
		default:
			return r, false
		}
		i = skipSpace(s, i)
		if i < len(s) && s[i] == ',' {
			i++
		}
	}
}

// quotedString reads the quoted string starting at s[i] == '"', returning its unescaped content and the index after
// the closing quote.
func quotedString(s []byte, i int) (val []byte, next int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return nil, i, false
	}
	escaped := false
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			escaped = true
			j++ // skip the escaped byte
		case '"':
			val = s[i+1 : j]
			if escaped {
				val = unescape(val)
			}
			return val, j + 1, true
		}
	}
	return nil, len(s), false
}

// unescape resolves the text format's label-value escapes (\\, \", \n). It allocates; see seriesRef.
func unescape(v []byte) []byte {
	out := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
			if v[i] == 'n' {
				out = append(out, '\n')
				continue
			}
		}
		out = append(out, v[i])
	}
	return out
}

func skipSpace(s []byte, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

func isLabelChar(c byte) bool {
	return c == '_' || c == ':' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}
