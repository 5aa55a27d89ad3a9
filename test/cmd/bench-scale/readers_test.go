package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseWatchLine(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       watchEvent
		ok         bool
	}{
		{"added", `{"type":"ADDED","object":{"kind":"PodMetrics","metadata":{"name":"p","namespace":"n","resourceVersion":"1700000000123","labels":{"resourceVersion":"9"}},"window":"15s"}}`,
			watchEvent{data: true, gen: 1700000000123}, true},
		{"modified", `{"type":"MODIFIED","object":{"metadata":{"resourceVersion":"42"}}}` + "\n", watchEvent{data: true, gen: 42}, true},
		{"deleted", `{"type":"DELETED","object":{"metadata":{"resourceVersion":"43"}}}`, watchEvent{data: true, gen: 43}, true},
		{"expired", `{"type":"ERROR","object":{"kind":"Status","metadata":{},"message":"too old: \"code\":1","reason":"Expired","code":410}}`,
			watchEvent{err: true, code: 410}, true},
		{"bookmark", `{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"44"}}}`, watchEvent{}, true},
		{"not an event", `{"kind":"Status","code":500}`, watchEvent{}, false},
		{"cut short", `{"type":"ADD`, watchEvent{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseWatchLine([]byte(tc.line))
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseWatchLine = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// watchServer streams ADDED for pods pods at generation 10, then MODIFIED for each of the generations in mods
// (every pod each), then ends as end says: "hold" keeps the stream open, "eof" closes it, "410" sends an ERROR.
func watchServer(t *testing.T, pods int, mods []uint64, end string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			http.Error(w, "not a watch", http.StatusBadRequest)
			return
		}
		event := func(typ string, gen uint64, i int) {
			fmt.Fprintf(w, `{"type":%q,"object":{"metadata":{"name":"p%d","resourceVersion":"%d"},"pad":"%s"}}`+"\n",
				typ, i, gen, strings.Repeat("x", 300<<10*(i%2))) // every other line longer than the read buffer
		}
		for i := range pods {
			event("ADDED", 10, i)
		}
		for _, g := range mods {
			for i := range pods {
				event("MODIFIED", g, i)
			}
		}
		switch end {
		case "410":
			fmt.Fprintln(w, `{"type":"ERROR","object":{"kind":"Status","reason":"Expired","code":410}}`)
		case "hold":
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestWatchPods(t *testing.T) {
	const pods = 3
	for _, tc := range []struct {
		name           string
		mods           []uint64
		end            string
		endGen         uint64
		received, due  int
		ended, timeout bool
	}{
		{"every collection", []uint64{11, 12}, "hold", 12, 9, 9, false, false},
		{"a collection skipped", []uint64{12}, "hold", 12, 6, 9, false, true},
		{"past the deadline's collection", []uint64{11, 12, 13}, "hold", 12, 9, 9, false, false},
		{"closed by the server", []uint64{11}, "eof", 12, 6, 9, true, false},
		{"ended by 410", nil, "410", 11, 3, 6, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := watchServer(t, pods, tc.mods, tc.end)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			var endGen atomic.Uint64
			endGen.Store(tc.endGen)
			w := watchPods(ctx, s.Client(), s.URL+"/pods?watch=true", 1, pods, &endGen)
			if got, due := w.received(tc.endGen), w.due(tc.endGen, pods); got != tc.received || due != tc.due {
				t.Errorf("received %d of %d due; want %d of %d", got, due, tc.received, tc.due)
			}
			if (w.ended != "") != tc.ended {
				t.Errorf("ended = %q, want ended: %v", w.ended, tc.ended)
			}
			// A watcher that has everything due stops by itself; one that is owed more waits for the phase's end.
			if timedOut := ctx.Err() != nil; timedOut != tc.timeout {
				t.Errorf("waited for the phase's end: %v, want %v", timedOut, tc.timeout)
			}
		})
	}
}

// pageServer serves n pods, a page at a time, with tokens "after-<i>"; the first request for each token it lists
// in fail is answered with that status instead.
func pageServer(t *testing.T, n int, fail map[string]int) *httptest.Server {
	failed := map[string]bool{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		tok := q.Get("continue")
		if code, ok := fail[tok]; ok && !failed[tok] {
			failed[tok] = true
			w.Header().Set("Retry-After", "0")
			http.Error(w, "no", code)
			return
		}
		var from, limit int
		fmt.Sscanf(tok, "after-%d", &from)
		fmt.Sscan(q.Get("limit"), &limit)
		to := min(n, from+limit)
		cont := ""
		if to < n {
			cont = fmt.Sprintf("after-%d", to)
		}
		fmt.Fprintf(w, `{"metadata":{"continue":%q},"items":[%s]}`, cont, strings.TrimSuffix(strings.Repeat(`{"window":"15s"},`, to-from), ","))
	}))
	t.Cleanup(s.Close)
	return s
}

func TestPagePods(t *testing.T) {
	s := pageServer(t, 25, map[string]int{"after-10": http.StatusTooManyRequests, "after-20": http.StatusGone})
	var budget atomic.Int64
	// A page, a 429 and its retry, a 410 on the third page, then a whole page-through from the start, and a page.
	budget.Store(8)
	p := pagePods(context.Background(), s.Client(), s.URL, 10, 25, time.Now().Add(time.Minute), &budget)
	if p.pages != 6 || p.throughs != 1 || p.short != 0 {
		t.Errorf("pages %d, page-throughs %d (%d short); want 6, 1, 0", p.pages, p.throughs, p.short)
	}
	if p.failures["status 429"] != 1 || p.failures["status 410"] != 1 || len(p.failures) != 2 {
		t.Errorf("failures %v, want one 429 and one 410", p.failures)
	}
}

func TestGenerationOf(t *testing.T) {
	for _, tc := range []struct {
		rv   string
		want uint64
		ok   bool
	}{
		{"42-abcdefghij", 42, true}, // the server's <generation>-<run>
		{"42", 42, true},            // a bare number, as before runs were named
		{"0-abcdefghij", 0, false},
		{"", 0, false},
		{"x-42", 0, false},
	} {
		got, err := generationOf(tc.rv)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("generationOf(%q) = %d, %v; want %d, ok %v", tc.rv, got, err, tc.want, tc.ok)
		}
	}
}
