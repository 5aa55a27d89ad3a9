package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// watchEvent is what the reader phase reads of one watch event line: its type, the object's resourceVersion (in
// metrics-ring, the generation of the snapshot, i.e. the collection, the event comes from) and, for an ERROR
// event, the Status code.
type watchEvent struct {
	data bool // ADDED, MODIFIED or DELETED
	err  bool // ERROR
	gen  uint64
	code int
}

var (
	typeMarker = []byte(`{"type":"`)
	rvMarker   = []byte(`"resourceVersion":"`)
	codeMarker = []byte(`"code":`)
)

// parseWatchLine reads one line of a JSON watch stream (one event per line) without decoding it: 100 watchers
// of 30,000 pods get millions of events a minute, and the clients must not be what falls behind. The first
// resourceVersion in an event is its object's: metadata puts it before labels and annotations.
func parseWatchLine(line []byte) (watchEvent, bool) {
	rest, ok := bytes.CutPrefix(line, typeMarker)
	end := bytes.IndexByte(rest, '"')
	if !ok || end < 0 {
		return watchEvent{}, false
	}
	var e watchEvent
	switch string(rest[:end]) {
	case "ADDED", "MODIFIED", "DELETED":
		e.data = true
	case "ERROR":
		e.err = true
		if i := bytes.LastIndex(rest, codeMarker); i >= 0 {
			e.code = int(leadingDigits(rest[i+len(codeMarker):]))
		}
		return e, true
	default: // BOOKMARK
		return e, true
	}
	if i := bytes.Index(rest, rvMarker); i >= 0 {
		e.gen = leadingDigits(rest[i+len(rvMarker):])
	}
	return e, true
}

func leadingDigits(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		v = v*10 + uint64(c-'0')
	}
	return v
}

// watchTally is one watcher's account: its data events per generation, and why it ended if the server ended it.
type watchTally struct {
	byGen    map[uint64]int
	events   int    // data events read in all
	firstGen uint64 // the generation of its initial ADDED events
	lastGen  uint64
	ended    string // "" while the phase, not the server, ended it
}

// received counts the data events of collections up to gen; due is what a watcher that started at firstGen is
// owed by then: an ADDED for every pod, then a MODIFIED for every pod per collection, since the simulator
// changes every sample in every scrape.
func (w *watchTally) received(gen uint64) int {
	n := 0
	for g, c := range w.byGen {
		if g <= gen {
			n += c
		}
	}
	return n
}

func (w *watchTally) due(gen uint64, pods int) int {
	if gen < w.firstGen {
		return 0
	}
	return pods * int(1+gen-w.firstGen)
}

// watchPods watches every pod at url until ctx ends, or until it is done: once endGen is known (not 0), when
// it holds every event due up to endGen or has moved past it.
func watchPods(ctx context.Context, hc *http.Client, url string, startGen uint64, pods int, endGen *atomic.Uint64) *watchTally {
	w := &watchTally{byGen: map[uint64]int{}, firstGen: startGen}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		w.ended = err.Error()
		return w
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			w.ended = "watch: " + errKind(err)
		}
		return w
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		w.ended = fmt.Sprintf("watch refused: status %d", resp.StatusCode)
		return w
	}
	br := bufio.NewReaderSize(resp.Body, 256<<10)
	var long []byte // a line longer than the buffer, gathered
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		if len(line) > 0 {
			if e, ok := parseWatchLine(line); ok && e.err {
				w.ended = fmt.Sprintf("watch ended by an ERROR event, code %d", e.code)
				return w
			} else if ok && e.data {
				if w.events == 0 {
					w.firstGen = e.gen
				}
				w.events++
				w.byGen[e.gen]++
				w.lastGen = max(w.lastGen, e.gen)
			}
		}
		if end := endGen.Load(); end != 0 && (w.lastGen > end || w.events >= w.due(end, pods)) {
			return w
		}
		if err != nil {
			if ctx.Err() == nil {
				w.ended = "watch closed: " + errKind(err)
				if errors.Is(err, io.EOF) {
					w.ended = "watch closed by the server"
				}
			}
			return w
		}
	}
}

// pageTally is one pager's account.
type pageTally struct {
	pages, throughs, short int            // short: a page-through that ended without every pod
	shortBy                map[string]int // short page-throughs by what they held
	failures               map[string]int
	ds                     []time.Duration
}

// pagePods pages through every pod at base, limit items a page, until deadline, ctx, or the shared page budget
// ends; each finished page-through starts again. It answers errors as client-go's pager and retry do: 429 waits
// for Retry-After (at most 5 s) and asks again, 410 (an expired continue token) starts again from the first
// page, any other failure asks again after a short pause.
func pagePods(ctx context.Context, hc *http.Client, base string, limit, pods int, deadline time.Time, budget *atomic.Int64) *pageTally {
	p := &pageTally{failures: map[string]int{}, shortBy: map[string]int{}}
	cont, items := "", 0
	for time.Now().Before(deadline) && ctx.Err() == nil && budget.Add(-1) >= 0 {
		url := fmt.Sprintf("%s%s?limit=%d", base, podsPath, limit)
		if cont != "" {
			url += "&continue=" + cont
		}
		start := time.Now()
		code, page, retryAfter, err := getPage(ctx, hc, url)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return p
			}
			p.failures[errKind(err)]++
			pause(ctx, 100*time.Millisecond)
		case code == http.StatusOK:
			p.pages++
			p.ds = append(p.ds, time.Since(start))
			items += page.items
			if cont = page.Metadata.Continue; cont == "" {
				p.throughs++
				if items != pods {
					p.short++
					p.shortBy[fmt.Sprintf("page-through with %d of %d pods", items, pods)]++
				}
				items = 0
			}
		case code == http.StatusGone:
			p.failures["status 410"]++
			cont, items = "", 0
		case code == http.StatusTooManyRequests:
			p.failures["status 429"]++
			pause(ctx, min(5*time.Second, max(100*time.Millisecond, retryAfter)))
		default:
			p.failures[fmt.Sprintf("status %d", code)]++
			pause(ctx, 100*time.Millisecond)
		}
	}
	return p
}

type podPage struct {
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
	Items []struct{} `json:"items"`
	items int
}

// getPage GETs one page; the items are counted, not decoded.
func getPage(ctx context.Context, hc *http.Client, url string) (int, podPage, time.Duration, error) {
	var page podPage
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, page, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, page, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		_, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, page, time.Duration(secs) * time.Second, err
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return resp.StatusCode, page, 0, fmt.Errorf("decoding a page: %w", err)
	}
	page.items = len(page.Items)
	// To its end, so that the connection is kept (get, measure.go).
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, page, 0, err
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
