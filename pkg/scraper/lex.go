package scraper

import (
	"bytes"
	"unicode/utf8"
)

// The line grammar of the Prometheus text format (version 0.0.4), in one pass over each line, as textparse's
// PromParser reads it (the differential fuzz target FuzzParserMatchesTextparse holds the two together):
//
//   - a series line of a family the parser reads (families.go), and any line starting with '{' (the UTF-8 form,
//     whose name comes inside the braces), is read whole: a line textparse rejects is lost and counted;
//   - the HELP and TYPE lines of those families are checked as textparse checks them;
//   - a series, HELP or TYPE line of any other family is passed over by its name alone, unvalidated, and so is
//     any other comment: none of them holds anything the parser uses;
//   - a line starting with anything else (after blanks) is lost and counted.
//
// Deliberately stricter than textparse: a raw newline or a NUL byte inside a quoted string, a NUL byte anywhere in
// a series line, and a series repeating namespace, pod or container (or giving __name__ as a label) lose the line.
// textparse accepts some of these, but none is valid text format or names one container unambiguously.
//
// As textparse reads it, though no kubelet writes it: a series line whose name follows blanks is named with them
// (textparse slices the name from the line's start), so it names no family the parser reads and is passed over,
// as metrics-server, which reads kubelets with textparse, passes it over.

// parsedLine is what a line of a family the parser reads holds.
type parsedLine struct {
	metric                    metric // metricOther: the line holds nothing the parser reads
	namespace, pod, container []byte // unescaped; slices of the body or of the lexer's scratch buffers
	value                     float64
	ts                        int64
	hasTS                     bool
}

// lexer is the state lines share: the name of the previous series line (most lines repeat it) and scratch space
// for escaped strings, so that no line allocates.
type lexer struct {
	lastName   []byte // the previous series line's metric name, a slice of the body being parsed
	lastMetric metric
	esc        [3][]byte // unescaped namespace, pod and container values
	scratch    []byte    // an unescaped name
}

// Which of the labels the parser reads a label name is.
const (
	labelOther uint8 = iota
	labelNamespace
	labelPod
	labelContainer
	labelName // __name__
)

// maxScratch is the most scratch space a lexer keeps between responses (a key of three 253-byte names fits).
const maxScratch = 1 << 10

// reset forgets the body: the parser outlives the worker's buffer, which is given back when a response grew it.
// Scratch space a freak line grew goes too.
func (l *lexer) reset() {
	l.lastName, l.lastMetric = nil, metricOther
	for i := range l.esc {
		if cap(l.esc[i]) > maxScratch {
			l.esc[i] = nil
		}
	}
	if cap(l.scratch) > maxScratch {
		l.scratch = nil
	}
}

// line reads the line starting at b[i] (b ends with a newline) into s and returns the index after it. On an error
// it returns the index where the line went wrong: the caller loses the line.
func (l *lexer) line(b []byte, i int, s *parsedLine) (int, error) {
	s.metric = metricOther
	start := i
	i = skipSpace(b, i)
	c := b[i]
	switch {
	case c == '\n':
		return i + 1, nil
	case c == '#':
		return l.comment(b, i)
	case c == '{':
		return l.sampleLine(b, i, false, s)
	case class[c]&cNameStart == 0:
		return i, errStart
	}
	if i > start {
		// textparse names such a series with its leading blanks: no family the parser reads.
		return i + bytes.IndexByte(b[i:], '\n') + 1, nil
	}
	var m metric
	j := i + len(l.lastName)
	if len(l.lastName) > 0 && j < len(b) && string(b[i:j]) == string(l.lastName) && class[b[j]]&cName == 0 {
		m = l.lastMetric
	} else {
		for j = i + 1; class[b[j]]&cName != 0; j++ {
		}
		m = metricOf(b[i:j])
		l.lastName, l.lastMetric = b[i:j], m
	}
	if m == metricOther {
		return j + bytes.IndexByte(b[j:], '\n') + 1, nil
	}
	s.metric = m
	return l.sampleLine(b, j, true, s)
}

// sampleLine reads a series line from b[i]: after its metric name when named, else from its opening brace.
func (l *lexer) sampleLine(b []byte, i int, named bool, s *parsedLine) (int, error) {
	s.namespace, s.pod, s.container = nil, nil, nil
	i = skipSpace(b, i)
	if b[i] == '{' {
		var err error
		if i, err = l.labels(b, i+1, named, s); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
	}
	start := i
	for class[b[i]]&cValue != 0 {
		i++
	}
	if i == start {
		return i, errValue
	}
	v, err := parseValue(b[start:i])
	if err != nil {
		return start, err
	}
	s.value, s.hasTS = v, false
	if i = skipSpace(b, i); '0' <= b[i] && b[i] <= '9' {
		if s.ts, i, err = timestamp(b, i); err != nil {
			return i, err
		}
		s.hasTS = true
		i = skipSpace(b, i)
	}
	if b[i] != '\n' {
		return i, errEndOfSeries
	}
	return i + 1, nil
}

// labels reads a series' labels from after its opening brace and returns the index after the closing one. Of a
// line without a name before the braces, the name is the quoted string that stands alone among them.
func (l *lexer) labels(b []byte, i int, named bool, s *parsedLine) (int, error) {
	var seen uint8 // bit 1<<labelX: which of the labels read came already
	for {
		i = skipSpace(b, i)
		start, c := i, b[i]
		var quotes, escaped bool
		switch {
		case c == '}':
			if !named {
				return i, errNoName
			}
			return i + 1, nil
		case class[c]&cLabelStart != 0:
			for i++; class[b[i]]&cLabel != 0; i++ {
			}
		case c == '"':
			var err error
			if i, escaped, _, err = quoted(b, i); err != nil {
				return i, err
			}
			quotes = true
		default:
			return i, errLabelName
		}
		tok := b[start:i]
		if quotes {
			tok = tok[1 : len(tok)-1]
		}
		i = skipSpace(b, i)
		if quotes && (b[i] == ',' || b[i] == '}') {
			if named {
				return i, errNameTwice
			}
			named = true
			s.metric = metricOf(l.unescaped(tok, escaped))
			if b[i] == ',' {
				i++
			}
			continue
		}
		if b[i] != '=' {
			return i, errEqual
		}
		if i = skipSpace(b, i+1); b[i] != '"' {
			return i, errLabelValue
		}
		start = i
		var valueEscaped, nonASCII bool
		var err error
		if i, valueEscaped, nonASCII, err = quoted(b, i); err != nil {
			return i, err
		}
		value := b[start+1 : i-1]
		if nonASCII && !utf8.Valid(value) {
			return start, errUTF8
		}
		if which := labelOf(l.unescaped(tok, escaped)); which != labelOther {
			if which == labelName || seen&(1<<which) != 0 {
				return start, errDuplicate
			}
			seen |= 1 << which
			if valueEscaped {
				k := which - labelNamespace
				l.esc[k] = unescape(l.esc[k][:0], value)
				value = l.esc[k]
			}
			switch which {
			case labelNamespace:
				s.namespace = value
			case labelPod:
				s.pod = value
			case labelContainer:
				s.container = value
			}
		}
		if i = skipSpace(b, i); b[i] == ',' {
			i++
		}
	}
}

// unescaped returns a quoted name's text as textparse's Labels gives it.
func (l *lexer) unescaped(tok []byte, escaped bool) []byte {
	if !escaped {
		return tok
	}
	l.scratch = unescape(l.scratch[:0], tok)
	return l.scratch
}

func labelOf(name []byte) uint8 {
	switch string(name) {
	case "namespace":
		return labelNamespace
	case "pod":
		return labelPod
	case "container":
		return labelContainer
	case "__name__":
		return labelName
	}
	return labelOther
}

// comment reads a line starting with '#' at b[i]. Of the HELP and TYPE lines of the families the parser reads, and
// of those naming a quoted metric, it checks what textparse checks; every other comment it passes over.
func (l *lexer) comment(b []byte, i int) (int, error) {
	end := i + bytes.IndexByte(b[i:], '\n')
	if bytes.IndexByte(b[i:end], 0) >= 0 {
		// textparse's lexer skips NUL bytes in some parts of a comment and stops at them in others: such a line
		// is a comment here, and says nothing the parser uses.
		return end + 1, nil
	}
	j := skipSpace(b, i+1)
	if j == i+1 || end-j < 5 {
		return end + 1, nil // `#text`, or too short for `HELP `
	}
	kind := b[j : j+4]
	isType := string(kind) == "TYPE"
	if !isType && string(kind) != "HELP" {
		return end + 1, nil
	}
	if k := skipSpace(b, j+4); k > j+4 {
		j = k
	} else {
		return end + 1, nil // `# HELPER`: a comment
	}
	switch c := b[j]; {
	case c == '"':
		var err error
		if j, _, _, err = quoted(b, j); err != nil {
			return j, err
		}
	case class[c]&cNameStart != 0:
		k := j + 1
		for class[b[k]]&cName != 0 {
			k++
		}
		if metricOf(b[j:k]) == metricOther {
			return end + 1, nil
		}
		j = k
	default:
		return end + 1, nil // no family named: none the parser reads
	}
	// textparse's text is the rest of the line without its first byte, or empty when the rest is blank.
	var text []byte
	if rest := b[j:end]; len(rest) > 1 && skipSpace(b, j) < end {
		text = rest[1:]
	}
	if isType {
		switch string(text) {
		case "counter", "gauge", "histogram", "summary", "untyped":
		default:
			return j, errType
		}
	} else if !utf8.Valid(text) {
		return j, errHelp
	}
	return end + 1, nil
}
