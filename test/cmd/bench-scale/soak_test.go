package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/metrics-ring/metrics-ring/test/framework"
	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
	"k8s.io/apimachinery/pkg/types"
)

// TestSlopes: a leak of 6 MiB an hour under a garbage collector's saw-tooth of 10 MiB shows in the minute minima's
// slope; the warm-up is left out.
func TestSlopes(t *testing.T) {
	var samples []memSample
	for i := range 360 { // an hour of 10 s samples
		at := time.Duration(i) * 10 * time.Second
		saw := float64(i%6) * 2 // 0-10 MiB within each minute
		warm := 0.0
		if at < 10*time.Minute {
			warm = 50 // start-up: discarded
		}
		samples = append(samples, memSample{at: at, rss: (100 + 6*at.Hours() + saw + warm) * (1 << 20), heap: math.NaN()})
	}
	mb := func(m memSample) float64 { return m.rss / (1 << 20) }
	if got := slopePerHour(minuteMinima(samples), 10*time.Minute, mb); math.Abs(got-6) > 0.01 {
		t.Errorf("minute minima slope %.3f MiB/h, want 6", got)
	}
	if got := slopePerHour(samples, 10*time.Minute, mb); math.Abs(got-6) > 0.5 {
		t.Errorf("all-sample slope %.3f MiB/h, want about 6", got)
	}
	if got := len(minuteMinima(samples)); got != 60 {
		t.Errorf("%d minute minima of an hour, want 60", got)
	}
	if got := slopePerHour(samples, 0, func(m memSample) float64 { return m.heap }); !math.IsNaN(got) {
		t.Errorf("slope of a heap never read = %v, want NaN", got)
	}
}

// TestPlotIsSmallWellFormedSVG: an hour of two servers' RSS and heap makes a valid SVG document under 50 KB.
func TestPlotIsSmallWellFormedSVG(t *testing.T) {
	var lines []plotLine
	for i, name := range []string{"metrics-ring", `metrics-server "v0.9.0" <x>`} {
		for _, dashed := range []bool{false, true} {
			l := plotLine{name: name, color: plotColors[i], dashed: dashed}
			for s := range 360 {
				l.points = append(l.points, [2]float64{float64(s) / 6, 100 + 10*math.Sin(float64(s))})
			}
			lines = append(lines, l)
		}
	}
	var b bytes.Buffer
	if err := writePlot(&b, "soak & more", lines); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 50<<10 {
		t.Errorf("plot is %d bytes, want under 50 KB", b.Len())
	}
	d := xml.NewDecoder(&b)
	polylines := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if polylines != 4 {
		t.Errorf("%d polylines, want 4", polylines)
	}
}

// TestTrackerSettles: time to be served from Running, deleted pods served after their deletion and for how
// long, pods over the limit counted and not probed.
func TestTrackerSettles(t *testing.T) {
	res := 15 * time.Second
	tr := newTracker(nil, "", res, 2)
	t0 := time.Unix(1000, 0)
	tr.created("ns/a", nil, t0)
	tr.created("ns/b", nil, t0)
	tr.created("ns/c", nil, t0) // over the limit
	tr.deleted("ns/x", nil, t0)
	tr.deleted("ns/y", nil, t0)
	tr.settle(t0.Add(5*time.Second), []string{"ns/a", "ns/b", "ns/x", "ns/y"}, []bool{true, false, true, false}, make([]string, 4))
	tr.settle(t0.Add(12*time.Second), []string{"ns/b", "ns/x"}, []bool{false, false}, make([]string, 2))
	tr.settle(t0.Add(6*res), nil, nil, nil) // b never served
	r := tr.result()
	if len(r.toServe) != 1 || r.toServe[0] != 5*time.Second || r.neverServed != 1 || r.newUntracked != 1 {
		t.Errorf("new pods: served after %v, never %d, untracked %d; want [5s], 1, 1", r.toServe, r.neverServed, r.newUntracked)
	}
	if r.servedAfterDeletion != 1 || r.maxServedAfter != 5*time.Second || r.deletedSeen != 2 {
		t.Errorf("deleted pods: %d served after deletion, longest %v, %d tracked; want 1, 5s, 2",
			r.servedAfterDeletion, r.maxServedAfter, r.deletedSeen)
	}
	if got := r.cycles(0.5, res); got != 5.0/15 {
		t.Errorf("p50 %.3f cycles, want 1/3", got)
	}
}

func TestCheckTopRow(t *testing.T) {
	want := map[string]kubeletsim.Usage{
		"app":     {CPUNanoCores: 30_000_000, MemoryBytes: 100 << 20},
		"sidecar": {CPUNanoCores: 20_000_000, MemoryBytes: 28 << 20},
	}
	for _, c := range []struct {
		cpu, mem string
		ok       bool
	}{
		{"50m", "128Mi", true},
		{"51m", "135Mi", true}, // the working set wanders up to 1/16 above
		{"60m", "128Mi", false},
		{"50m", "140Mi", false},
		{"50m", "100Mi", false},
		{"0.05", "128Mi", false},
	} {
		if msg := checkTopRow(want, c.cpu, c.mem); (msg == "") != c.ok {
			t.Errorf("checkTopRow(%s, %s) = %q, want ok %v", c.cpu, c.mem, msg, c.ok)
		}
	}
}

func TestEventsBetween(t *testing.T) {
	stale := "failed to get cpu utilization: did not receive metrics for targeted pods (pods might be unready)"
	before := map[types.UID]eventCount{"a": {3, stale}}
	after := map[types.UID]eventCount{"a": {5, stale}, "b": {1, "unable to fetch metrics for sim-ns-1/sim-pod-4-2"},
		"c": {1, "unable to fetch metrics for sim-ns-2/sim-pod-9-0"}}
	got, causes := eventsBetween(before, after)
	if got != 4 {
		t.Errorf("eventsBetween = %d, want 4 (2 repeats of a, b and c once)", got)
	}
	if want := map[string]int{stale: 2, "unable to fetch metrics for <name>/<name>": 2}; !maps.Equal(causes, want) {
		t.Errorf("causes = %v, want %v (names left out: one cause, one line)", causes, want)
	}
}

func TestSoakFlagsValidated(t *testing.T) {
	base := options{nodes: 10, pods: 30, containers: 2, nsCount: 10, resolution: 15 * time.Second,
		measure: time.Minute, requests: 1, simProcesses: 0}
	base.hpaPods = 15
	for _, c := range []struct {
		name string
		set  func(o *options)
		want string
	}{
		{"churn without soak", func(o *options) { o.scale, o.churnPerSec = true, 1 }, "set -soak"},
		{"warm-up longer than the soak", func(o *options) { o.soak, o.soakWarmup = 2*time.Minute, 3*time.Minute }, "no memory samples"},
		{"compared window longer", func(o *options) { o.soak, o.soakWarmup, o.soakCompared = 10*time.Minute, time.Minute, time.Hour }, "at most -soak"},
		{"compared window within warm-up", func(o *options) { o.soak, o.soakWarmup, o.soakCompared = time.Hour, 5*time.Minute, 5*time.Minute }, "more than -soak-warmup"},
		{"heap profiles too often", func(o *options) { o.soak, o.soakWarmup, o.soakProfileEvery = time.Hour, time.Minute, time.Second }, "-soak-heap-profile-every"},
		{"warm-up churn without churn", func(o *options) { o.soak, o.soakWarmup, o.warmupChurnPerSec = time.Hour, time.Minute, 40 }, "-soak-warmup-churn-per-sec 40"},
		{"warm-up churn without warm-up", func(o *options) {
			o.soak, o.soakWarmup, o.churnPerSec, o.warmupChurnPerSec = time.Hour, 0, 10, 40
		}, "-soak-warmup-churn-per-sec 40"},
		{"negative warm-up churn", func(o *options) {
			o.soak, o.soakWarmup, o.churnPerSec, o.warmupChurnPerSec = time.Hour, time.Minute, 10, -1
		}, "-soak-warmup-churn-per-sec -1"},
		{"more HPAs than workloads", func(o *options) { o.soak, o.soakWarmup, o.hpa = time.Hour, time.Minute, 21 }, "has 20 workloads"},
	} {
		o := base
		o.soakTopEvery, o.soakTrack, o.hpaSyncPeriod = time.Minute, 1, 15*time.Second
		c.set(&o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: validate() = %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestProfileTimes: heap profiles from the warm-up's end, every -soak-heap-profile-every, none within half a
// period of the end's own.
func TestProfileTimes(t *testing.T) {
	m := time.Minute
	for _, c := range []struct {
		window, warmup, every time.Duration
		want                  []time.Duration
	}{
		{130 * m, 10 * m, 0, []time.Duration{10 * m}},
		{130 * m, 10 * m, 30 * m, []time.Duration{10 * m, 40 * m, 70 * m, 100 * m}},
		{125 * m, 10 * m, 30 * m, []time.Duration{10 * m, 40 * m, 70 * m, 100 * m}},
		{114 * m, 10 * m, 30 * m, []time.Duration{10 * m, 40 * m, 70 * m}},
		{10 * m, 30 * m, 2 * m, []time.Duration{5 * m, 7 * m, 9 * m}},
	} {
		if got := profileTimes(c.window, c.warmup, c.every); !slices.Equal(got, c.want) {
			t.Errorf("profileTimes(%s, %s, %s) = %v, want %v", c.window, c.warmup, c.every, got, c.want)
		}
	}
}

// TestHeapProfileLines: a profile that failed after the warm-up's is reported as such, beside the ones saved, not
// as a missing warm-up profile.
func TestHeapProfileLines(t *testing.T) {
	boom := errors.New("connection refused")
	for _, c := range []struct {
		name string
		x    soakResult
		want []string
	}{
		{"none asked", soakResult{}, nil},
		{"warm-up's failed", soakResult{profilesErr: boom}, []string{"  s: no heap profile at the warm-up's end: connection refused"}},
		{"all saved", soakResult{profileWarm: "w", profileEnd: "e", profileBetween: []string{"a", "b"}},
			[]string{"  s: heap profiles w (the warm-up's end) and e", "  s: heap profiles between them: a b"}},
		{"a later one failed", soakResult{profileWarm: "w", profileEnd: "e", profileBetween: []string{"a"}, profilesErr: boom},
			[]string{"  s: heap profiles w (the warm-up's end) and e", "  s: heap profiles between them: a",
				"  s: heap profiles between them stopped after 1: connection refused"}},
	} {
		if got := heapProfileLines("s", &c.x); !slices.Equal(got, c.want) {
			t.Errorf("%s: heapProfileLines() = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestHeapParts: the runtime's parts are read from the Go collector's names, a part of several metrics is their
// sum, and a part the server does not serve is NaN, not zero (which would read as a flat, leak-free line).
func TestHeapParts(t *testing.T) {
	m := samples{"go_gc_heap_live_bytes": 100, "go_memory_classes_heap_unused_bytes": 7,
		"go_memory_classes_heap_stacks_bytes": 3, "go_memory_classes_os_stacks_bytes": 1,
		"go_memory_classes_metadata_other_bytes": 5, "go_memory_classes_other_bytes": 2}
	p := readHeapParts(m)
	if p.live != 100 || p.unused != 7 || p.stacks != 4 || p.other != 7 {
		t.Errorf("parts %+v, want live 100, unused 7, stacks 3+1, other 5+2", p)
	}
	for name, v := range map[string]float64{"goal": p.goal, "objects": p.objects, "free": p.free} {
		if !math.IsNaN(v) {
			t.Errorf("%s = %v with no metric for it, want NaN", name, v)
		}
	}
	samples := []memSample{{at: 0, parts: p}, {at: time.Minute, parts: noHeapParts}, {at: 2 * time.Minute, parts: heapParts{live: 200}}}
	if got := meanOf(samples, 0, func(m memSample) float64 { return m.parts.live }); got != 150 {
		t.Errorf("mean live heap %v over samples 100, unread, 200: want 150 (an unread sample left out)", got)
	}
}

// TestSoakCSV: every server's samples are written, one row each under the header, with what was not served empty
// (not zero, which would read as a flat line).
func TestSoakCSV(t *testing.T) {
	r := &result{targets: []*targetResult{
		{name: "metrics-ring", soak: &soakResult{samples: []memSample{
			{at: 10 * time.Second, rss: 100, anon: 60, file: 40, heap: 50, goroutines: 7, pods: 3, parts: heapParts{live: 30, goal: 37.5, objects: 35, unused: 5, free: 2, stacks: 1, other: 4},
				carried: carried{load1: 4.5, reads: 6, answers: 1024, keptBuild: 2048, serverCores: 0.25, othersCores: 1.5}},
			{at: 20 * time.Second, rss: 101, anon: 61, file: 40, heap: math.NaN(), goroutines: math.NaN(), pods: math.NaN(), parts: noHeapParts,
				carried: carried{load1: 4.25, reads: math.NaN(), answers: math.NaN(), keptBuild: math.NaN(), serverCores: math.NaN(), othersCores: math.NaN()}},
		}}},
		{name: "no soak"},
	}}
	var b bytes.Buffer
	if err := r.writeSoakCSV(&b); err != nil {
		t.Fatal(err)
	}
	want := strings.Join(soakCSVHeader, ",") + "\n" +
		"metrics-ring,10,100,60,40,50,7,3,30,37.5,35,5,2,1,4,4.5,6,1024,2048,0.25,1.5\n" +
		"metrics-ring,20,101,61,40,,,,,,,,,,,4.25,,,,,\n"
	if got := b.String(); got != want {
		t.Errorf("samples file:\n%s\nwant:\n%s", got, want)
	}
	if got := soakCSVPath("/tmp/metrics-ring-soak.svg"); got != "/tmp/metrics-ring-soak.csv" {
		t.Errorf("samples beside %q, want /tmp/metrics-ring-soak.csv", got)
	}
}

// TestSpreadDefault: a soak with churn places pods at random unless -spread=false says otherwise, other runs place
// -pods on every node unless -spread says otherwise, and a simulator shard is told the placement and its seed (a
// child placing otherwise would serve pods the API has on other nodes).
func TestSpreadDefault(t *testing.T) {
	for _, c := range []struct {
		name  string
		soak  time.Duration
		churn float64
		set   map[string]bool
		given bool
		want  bool
	}{
		{"soak with churn", time.Hour, 10, nil, false, true},
		{"soak with churn, -spread=false", time.Hour, 10, map[string]bool{"spread": true}, false, false},
		{"soak without churn", time.Hour, 0, nil, false, false},
		{"no soak", 0, 0, nil, false, false},
		{"no soak, -spread", 0, 0, map[string]bool{"spread": true}, true, true},
	} {
		var o options
		o.soak, o.churnPerSec, o.spread, o.churnSeed = c.soak, c.churn, c.given, 41
		o.completeSpread(c.set)
		if o.spread != c.want {
			t.Errorf("%s: spread %v, want %v", c.name, o.spread, c.want)
		}
		args := o.shardArgs(0, "ca.pem")
		if want := fmt.Sprintf("-spread=%v", c.want); !slices.Contains(args, want) {
			t.Errorf("%s: a shard's flags %q do not say %q", c.name, args, want)
		}
		if i := slices.Index(args, "-churn-seed"); i < 0 || i+1 >= len(args) || args[i+1] != "41" {
			t.Errorf("%s: a shard's flags %q do not pass -churn-seed 41", c.name, args)
		}
		if cfg := o.simConfig(); cfg.Spread != c.want || cfg.SpreadSeed != 41 {
			t.Errorf("%s: the simulator's Spread %v (seed %d), want %v (seed 41)", c.name, cfg.Spread, cfg.SpreadSeed, c.want)
		}
	}
}

// TestSlopeInterval: a steady rise under a fast sawtooth is told precisely, and minutes-long swings over a flat
// floor give an interval that reaches both sides of zero, however steep their own fit reads.
func TestSlopeInterval(t *testing.T) {
	hour := func(rss func(at time.Duration) float64) []memSample {
		var out []memSample
		for i := range 360 {
			at := time.Duration(i) * 10 * time.Second
			out = append(out, memSample{at: at, rss: rss(at) * (1 << 20)})
		}
		return out
	}
	mb := func(m memSample) float64 { return m.rss / (1 << 20) }
	for _, c := range []struct {
		name               string
		samples            []memSample
		from               time.Duration
		lo, hi             float64 // the interval must lie within [lo, hi] MiB/h...
		minHalf, maxHalf   float64 // ...and be this wide
		wantNaN, wantsZero bool
	}{
		{name: "a rise of 6 MiB/h under a 10 MiB sawtooth a minute",
			samples: hour(func(at time.Duration) float64 { return 100 + 6*at.Hours() + float64(int(at.Seconds()/10)%6)*2 }),
			from:    10 * time.Minute, lo: 5, hi: 7, minHalf: 0, maxHalf: 1},
		{name: "a flat floor swinging 5 MiB either way every 30 minutes",
			samples: hour(func(at time.Duration) float64 { return 200 + 5*math.Sin(2*math.Pi*at.Minutes()/30) }),
			from:    10 * time.Minute, lo: -40, hi: 40, minHalf: 2, maxHalf: 40, wantsZero: true},
		{name: "two blocks", samples: hour(func(at time.Duration) float64 { return 100 }), from: 50 * time.Minute, wantNaN: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			slope, half := slopeInterval(c.samples, c.from, slopeBlock, mb)
			if c.wantNaN {
				if !math.IsNaN(slope) || !math.IsNaN(half) {
					t.Fatalf("slope %v ± %v, want NaN", slope, half)
				}
				return
			}
			if slope-half < c.lo || slope+half > c.hi || half < c.minHalf || half > c.maxHalf {
				t.Errorf("slope %.2f ± %.2f MiB/h, want within [%v, %v] and ± between %v and %v", slope, half, c.lo, c.hi, c.minHalf, c.maxHalf)
			}
			if c.wantsZero && (slope-half > 0 || slope+half < 0) {
				t.Errorf("slope %.2f ± %.2f MiB/h excludes zero: swings read as a slope", slope, half)
			}
			if all := slopePerHour(c.samples, c.from, mb); c.wantsZero && math.Abs(all) < 1 {
				t.Errorf("the 10 s fit reads %.2f MiB/h: the case does not swing enough to test the interval", all)
			}
		})
	}
}

func TestStudentT975(t *testing.T) {
	for df, want := range map[int]float64{1: 12.706, 8: 2.306, 30: 2.042, 40: 2.021, 120: 1.980} {
		if got := studentT975(df); math.Abs(got-want) > 0.003 {
			t.Errorf("t(0.975, %d) = %.3f, want %.3f", df, got, want)
		}
	}
}

// TestSoakTableCarried: the soak's table says what load the samples were taken under, and the RSS slope's interval.
func TestSoakTableCarried(t *testing.T) {
	var samples []memSample
	for i := range 360 {
		at := time.Duration(i) * 10 * time.Second
		samples = append(samples, memSample{at: at, rss: 200 << 20, heap: math.NaN(), goroutines: math.NaN(), pods: math.NaN(),
			parts: noHeapParts, carried: carried{load1: 4 + 2*at.Hours(), reads: 6, answers: 3 << 20, keptBuild: math.NaN()}})
	}
	r := &result{targets: []*targetResult{{name: "metrics-ring", soak: &soakResult{samples: samples, warmup: 10 * time.Minute, duration: time.Hour}}}}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	r.printSoak(table{tw: tw, targets: r.targets})
	tw.Flush()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`machine load average \(1 min\): mean after warm-up +5\.1[67]\n +its slope after warm-up +\+2\.00 /h\n`),
		regexp.MustCompile(`answers in flight, MiB: mean after warm-up +3\.00\n`),
		regexp.MustCompile(`readers' builds kept, MiB: mean after warm-up +NaN\n`),
		regexp.MustCompile(`fitted to 5-minute means +\+0\.0 MiB/h\n +± its 95 % interval +±0\.0 MiB/h\n`),
	} {
		if !want.MatchString(b.String()) {
			t.Errorf("the soak table has no line matching %s:\n%s", want, b.String())
		}
	}
}

// TestCPURates: the cores used between samples, the others' counted only for processes read both times and not
// restarted.
func TestCPURates(t *testing.T) {
	var c cpuRates
	t0 := time.Unix(1000, 0)
	procs := func(cpu map[string]time.Duration) map[string]framework.ProcStat {
		m := map[string]framework.ProcStat{}
		for name, d := range cpu {
			m[name] = framework.ProcStat{CPU: d}
		}
		return m
	}
	for _, tc := range []struct {
		name                   string
		at, serverCPU          time.Duration
		others                 map[string]time.Duration
		wantServer, wantOthers float64
	}{
		{"first: nothing to compare", 0, 5 * time.Second, map[string]time.Duration{"etcd": time.Second}, math.NaN(), math.NaN()},
		{"10 s later", 10 * time.Second, 7 * time.Second,
			map[string]time.Duration{"etcd": 6 * time.Second, "kcm": 3 * time.Second}, 0.2, 0.5}, // kcm is new: not counted
		{"etcd unread", 20 * time.Second, 8 * time.Second, map[string]time.Duration{"kcm": 8 * time.Second}, 0.1, 0.5},
		{"etcd back, restarted", 30 * time.Second, 8 * time.Second,
			map[string]time.Duration{"etcd": time.Second, "kcm": 10 * time.Second}, 0, 0.2},
		{"none read", 40 * time.Second, 9 * time.Second, nil, 0.1, math.NaN()},
	} {
		s, o := c.next(t0.Add(tc.at), tc.serverCPU, procs(tc.others))
		if !same(s, tc.wantServer) || !same(o, tc.wantOthers) {
			t.Errorf("%s: server %v, others %v cores; want %v, %v", tc.name, s, o, tc.wantServer, tc.wantOthers)
		}
	}
}

// same says a and b are equal to a part in a million, or both NaN.
func same(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b))
}

// TestChurnRate: the churn replaces pods at the warm-up's rate until the warm-up ends, at -churn-per-sec after, and
// at -churn-per-sec throughout when the warm-up's rate is not set.
func TestChurnRate(t *testing.T) {
	for _, c := range []struct {
		name        string
		warm        float64
		elapsed     time.Duration
		wantReplace float64
	}{
		{"start", 40, 0, 0},
		{"within the warm-up", 40, 30 * time.Second, 1200},
		{"at the warm-up's end", 40, 20 * time.Minute, 48000},
		{"after the warm-up", 40, 21 * time.Minute, 48600},
		{"no warm-up rate", 0, 21 * time.Minute, 12600},
	} {
		o := soakOptions{churnPerSec: 10, warmupChurnPerSec: c.warm, soakWarmup: 20 * time.Minute}
		if got := o.churn().by(c.elapsed); got != c.wantReplace {
			t.Errorf("%s: %v replaced after %s, want %v", c.name, got, c.elapsed, c.wantReplace)
		}
	}
}
