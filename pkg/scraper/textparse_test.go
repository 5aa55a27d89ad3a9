package scraper

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// The parser's lexer is held to prometheus/model/textparse, the oracle: each line of a body goes through
// textparse's PromParser on its own, the series it accepts of the families the parser reads go through the
// parser's own merging (merge.go, tested apart), and the batch and counts must be the parser's. Lines textparse
// rejects must be lost by the parser when they are of the families it reads (lex.go says which); the parser may
// lose no line textparse accepts but those lex.go names as deliberately stricter.

// oracle is textparse's verdict on a body.
type oracle struct {
	batch    storage.Batch
	stats    parseStats   // all but BadLines and FirstError
	mustLose map[int]bool // lines (from 1) the parser must lose
	mayLose  map[int]bool // ... and those it may lose
}

var (
	seriesName = regexp.MustCompile(`^([ \t]*[a-zA-Z_:][a-zA-Z0-9_:]*)`) // with leading blanks, as textparse names it
	metaName   = regexp.MustCompile(`^[ \t]*#[ \t]+(?:HELP|TYPE)[ \t]+("|[a-zA-Z_:][a-zA-Z0-9_:]*)`)
)

// readsLine says whether a line is one the parser reads (and so must lose when it is bad), from its first bytes:
// a series or HELP/TYPE line of a family it reads, a HELP/TYPE line naming a quoted metric, a line starting with
// '{', and a line starting with a byte no line may start with.
func readsLine(line []byte) bool {
	rest := bytes.TrimLeft(line, " \t")
	switch {
	case len(rest) == 0 || rest[0] == '\n':
		return false
	case rest[0] == '{':
		return true
	case rest[0] == '#':
		m := metaName.FindSubmatch(line)
		return m != nil && (string(m[1]) == `"` || metricOf(m[1]) != metricOther)
	}
	if m := seriesName.FindSubmatch(line); m != nil {
		return metricOf(m[1]) != metricOther
	}
	return true
}

// textparseLine is textparse's reading of one line: a series (lbls set), another entry, or an error.
func textparseLine(t testing.TB, line []byte) (lbls labels.Labels, ts *int64, v float64, isSeries bool, err error) {
	// NewPromParser appends a newline to its input: a copy keeps it off the body.
	tp := textparse.NewPromParser(bytes.Clone(line), labels.NewSymbolTable(), false)
	et, err := tp.Next()
	if errors.Is(err, io.EOF) {
		if len(bytes.Trim(line, " \t\n")) > 0 {
			err = errors.New("textparse stopped early (a NUL byte)")
		} else {
			err = nil
		}
		return lbls, nil, 0, false, err
	}
	if err != nil {
		return lbls, nil, 0, false, err
	}
	if et == textparse.EntrySeries {
		_, ts, v = tp.Series()
		if ts != nil {
			kept := *ts // valid only until the next call
			ts = &kept
		}
		tp.Labels(&lbls)
		isSeries = true
	}
	if _, err := tp.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("textparse read more than one entry from the line %q: %v", line, err)
	}
	return lbls, ts, v, isSeries, nil
}

// ambiguous says whether a series repeats a label the parser reads (textparse accepts repeated labels).
func ambiguous(lbls labels.Labels) bool {
	count := map[string]int{}
	lbls.Range(func(l labels.Label) { count[l.Name]++ })
	return count["__name__"] > 1 || count["namespace"] > 1 || count["pod"] > 1 || count["container"] > 1
}

func textparseOracle(t testing.TB, body []byte, now time.Time, node string) oracle {
	o := oracle{mustLose: map[int]bool{}, mayLose: map[int]bool{}}
	if n := len(body); n > 0 && body[n-1] != '\n' {
		body = body[:bytes.LastIndexByte(body, '\n')+1]
		o.stats.Truncated = true
	}
	p := newParser()
	p.begin(&o.batch)
	for n, line := range bytes.SplitAfter(body, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		n++
		lbls, ts, v, isSeries, err := textparseLine(t, line)
		reads, nul := readsLine(line), bytes.IndexByte(line, 0) >= 0
		var s parsedLine
		if isSeries {
			// textparse's name of a line starting with blanks starts with them too (its Labels slices the name from
			// the line's start): no family the parser reads, and the parser passes such a line over too (lex.go).
			s = parsedLine{metric: metricOf([]byte(lbls.Get("__name__"))), value: v, ts: now.UnixMilli(),
				namespace: []byte(lbls.Get("namespace")), pod: []byte(lbls.Get("pod")),
				container: []byte(lbls.Get("container"))}
			if ts != nil {
				s.ts = *ts
			}
		}
		switch {
		case err != nil:
			o.mayLose[n] = true
			o.mustLose[n] = reads && !nul
		case isSeries && reads && (nul || ambiguous(lbls)):
			o.mustLose[n], o.mayLose[n] = true, true // deliberately stricter than textparse (lex.go)
		case nul:
			o.mayLose[n] = true // a comment with a NUL byte: textparse's verdict depends on where the NUL is
		case s.metric != metricOther:
			p.sample(&s, s.ts, &o.stats)
		}
	}
	p.finish(node, &o.batch, &o.stats)
	return o
}

// badLinesOf returns the lines the parser loses when it reads each line alone.
func badLinesOf(body []byte) []int {
	var bad []int
	var b storage.Batch
	p := newParser()
	for n, line := range bytes.SplitAfter(body, []byte{'\n'}) {
		if len(line) > 0 && line[len(line)-1] == '\n' && p.parse(line, time.Unix(0, 0), "n", &b).BadLines > 0 {
			bad = append(bad, n+1)
		}
	}
	return bad
}

// diffBatch describes how got differs from want, or returns "".
func diffBatch(got, want *storage.Batch) string {
	sample := func(s storage.Sample) string {
		return fmt.Sprintf("t=%d start=%v cpu=%x mem=%x swap=%x/%v", s.Timestamp.UnixMilli(), s.StartTime.UnixNano(),
			math.Float64bits(s.CPU), math.Float64bits(s.Memory), math.Float64bits(s.Swap), s.HasSwap)
	}
	var g, w []string
	for _, n := range got.Nodes {
		g = append(g, n.Node+" "+sample(n.Sample))
	}
	for _, n := range want.Nodes {
		w = append(w, n.Node+" "+sample(n.Sample))
	}
	for _, c := range got.Containers {
		g = append(g, fmt.Sprintf("%q/%q/%q %s", c.Namespace, c.Pod, c.Container, sample(c.Sample)))
	}
	for _, c := range want.Containers {
		w = append(w, fmt.Sprintf("%q/%q/%q %s", c.Namespace, c.Pod, c.Container, sample(c.Sample)))
	}
	if slices.Equal(g, w) {
		return ""
	}
	return fmt.Sprintf("got\n  %s\nwant (textparse)\n  %s", strings.Join(g, "\n  "), strings.Join(w, "\n  "))
}

// checkAgainstTextparse parses body with p and compares the result with textparse's.
func checkAgainstTextparse(t *testing.T, p *parser, body []byte) {
	t.Helper()
	now := time.UnixMilli(1_795_262_400_000)
	orig := bytes.Clone(body)
	var got storage.Batch
	stats := p.parse(body, now, "n", &got)
	if !bytes.Equal(body, orig) {
		t.Fatalf("parse changed its input")
	}
	want := textparseOracle(t, body, now, "n")
	if d := diffBatch(&got, &want.batch); d != "" {
		t.Errorf("samples differ from textparse's for %q:\n%s", body, d)
	}
	counts := stats
	counts.BadLines, counts.FirstError = 0, nil
	if counts != want.stats {
		t.Errorf("counts %+v, textparse's %+v, for %q", stats, want.stats, body)
	}
	bad := badLinesOf(body)
	if len(bad) != stats.BadLines {
		t.Errorf("%d bad lines in the body, %d when read line by line (%v), in %q", stats.BadLines, len(bad), bad, body)
	}
	if len(bad) > 0 && (stats.FirstError == nil ||
		!strings.HasPrefix(stats.FirstError.Error(), fmt.Sprintf("line %d:", bad[0]))) {
		t.Errorf("first error %v, want one of line %d", stats.FirstError, bad[0])
	}
	lines := bytes.SplitAfter(body, []byte{'\n'})
	for n := range want.mustLose {
		if want.mustLose[n] && !slices.Contains(bad, n) {
			t.Errorf("line %d %q: textparse rejects it (or lex.go says to lose it), the parser read it", n, lines[n-1])
		}
	}
	for _, n := range bad {
		if !want.mayLose[n] {
			t.Errorf("line %d %q: the parser lost it, textparse reads it", n, lines[n-1])
		}
	}
}

func TestParserMatchesTextparseOnFixtures(t *testing.T) {
	for _, name := range []string{"metrics-resource-30pods.txt", "metrics-resource-110pods.txt", "kubeletsim-7pods.txt"} {
		t.Run(name, func(t *testing.T) {
			body := readFixture(t, name)
			p := newParser()
			checkAgainstTextparse(t, p, body)
			checkAgainstTextparse(t, p, body)
		})
	}
}

// excerpt keeps a response's comments and the first n series of each family.
func excerpt(body []byte, n int) []byte {
	var out []byte
	count := map[string]int{}
	for _, line := range bytes.SplitAfter(body, []byte{'\n'}) {
		if m := seriesName.FindSubmatch(line); m != nil {
			if count[string(m[1])]++; count[string(m[1])] > n {
				continue
			}
		}
		out = append(out, line...)
	}
	return out
}

// FuzzParserMatchesTextparse feeds the parser and textparse the same bytes: kubelet responses (the fixtures and
// the simulator's), the lines below, and the fuzzer's mutations of them.
func FuzzParserMatchesTextparse(f *testing.F) {
	// Excerpts: the fuzzer minimizes every input that finds new code, at the harness' cost per byte, and whole
	// responses (TestParserMatchesTextparseOnFixtures) would take its whole time budget doing so.
	for _, name := range []string{"metrics-resource-30pods.txt", "kubeletsim-7pods.txt"} {
		f.Add(excerpt(readFixture(f, name), 2))
	}
	for _, line := range textparseCases {
		f.Add([]byte(node1 + line + "\n" + ctr("a", "c", 1, 2)))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p := newParser()
		checkAgainstTextparse(t, p, in)
		checkAgainstTextparse(t, p, in) // again: containers interned, the order predicted
	})
}
