package storage

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of DESIGN.md section 2, and the fewest samples a series may keep: a CPU rate needs two.
const (
	DefaultHistory    = 16
	DefaultResolution = 15 * time.Second
	MinHistory        = 2
)

// DefaultWindow and DefaultStaleAfter are --window's and --stale-after's defaults for a resolution.
func DefaultWindow(resolution time.Duration) time.Duration     { return resolution }
func DefaultStaleAfter(resolution time.Duration) time.Duration { return 3 * resolution }

// Options configure a Storage. Zero values take the defaults of DESIGN.md section 2.
type Options struct {
	// Source names the source in health and errors ("kubelet", "prometheus").
	Source string
	// History is the number of samples kept per series (default DefaultHistory; fewer than MinHistory takes the default).
	History int
	// Resolution is the collection interval (default 15s).
	Resolution time.Duration
	// Window is the CPU rate window (default one Resolution).
	Window time.Duration
	// StaleAfter is how old a series' newest collection may be and still be served (default 3 Resolutions).
	StaleAfter time.Duration
	// Now is the clock (default time.Now); tests set it. Storage only measures time elapsed on it (Time.Sub), so
	// the monotonic readings of time.Now make a step of the wall clock harmless.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Source == "" {
		o.Source = "kubelet"
	}
	if o.History < MinHistory {
		o.History = DefaultHistory
	}
	if o.Resolution <= 0 {
		o.Resolution = DefaultResolution
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow(o.Resolution)
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter(o.Resolution)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

type podKey struct{ namespace, name string }

// pod holds the series of one pod's containers; pods have a handful of containers, so a slice beats a map.
type pod struct {
	node       string      // the node the pod is bound to; only batches of that key count
	containers []container // sorted by name, so building a view needs no sort
	batch      uint64      // sequence number of the newest Append that reported the pod
	// object identifies the pod object (PodObject.UID), and created is when it was created in Unix nanoseconds,
	// less CreationSkew: samples stamped before it, or of containers started before it, are its predecessor's.
	// Both 0 when unknown.
	object      uint64
	created     int64
	slot        int32 // the pod's index in Storage.slots and in every view's pods
	implausible bool  // its newest report sums to more than its node can do: not served
}

// batchMark remembers a batch key's previous Append: its newest sample time, for fresh containers, and when it
// happened, for pruning.
type batchMark struct{ ts, seen int64 }

type container struct {
	name string
	*series
}

// Storage keeps recent samples of every series and serves NodePoint and PodPoint values.
type Storage struct {
	opts Options

	mu        sync.Mutex // held by writers: Append, Commit and the informers' events
	nodes     map[string]*series
	slots     slots                // every pod, by its key (slots.get) and by its slot
	lastBatch map[string]batchMark // each batch key's previous Append
	batches   uint64               // Append calls so far, the sequence number of series.batch
	health    Health
	// clock is Options.Now and its reading at New: times kept for staleness are nanoseconds since then (mono).
	clock monoClock

	// epoch is the first generation: the clock in milliseconds at New. Publications come about twice a second at
	// most (MinPublishInterval), so generations keep growing across restarts of the process and a watch resumed against
	// a restarted server is told its resourceVersion is too old (410 Gone: relist) rather than from the future.
	epoch     uint64
	published uint64 // publications so far: the newest generation is epoch+published
	// pubBatches and pubAt are batches and the clock (mono) at the newest publication.
	pubBatches uint64
	pubAt      int64
	view       atomic.Pointer[view] // the servable snapshot, replaced at each publication
	committed  atomic.Pointer[view] // the newest view a Commit published (Committed)
	dirty      dirty                // what changed since it was built, for an interim build (interim.go)
	// recent holds the retained views, newest last, so a watch can resume from a recent generation.
	recent atomic.Pointer[[]*view]

	// capacity is each node's, as the node informer says (NodeCapacity): what no served value may exceed.
	capacity map[string]Capacity
	// touched is store's scratch: the first sample of each pod a batch reported, to judge the pod once its
	// containers are in.
	touched []*ContainerSample
}

// New returns an empty Storage.
func New(o Options) *Storage {
	registerMetrics()
	o = o.withDefaults()
	s := &Storage{
		opts:      o,
		nodes:     map[string]*series{},
		slots:     newSlots(),
		lastBatch: map[string]batchMark{},
		capacity:  map[string]Capacity{},
		health:    Health{Source: o.Source},
		clock:     monoClock{now: o.Now, base: o.Now()},
	}
	s.epoch = uint64(s.clock.base.UnixMilli())
	first := &view{health: s.health, generation: s.epoch, changed: make(chan struct{}), clock: s.clock,
		staleAfter: o.StaleAfter, committed: true}
	s.view.Store(first)
	s.committed.Store(first)
	s.recent.Store(&[]*view{first})
	return s
}

// Options returns the options in force, defaults applied.
func (s *Storage) Options() Options { return s.opts }

// store appends one batch's samples to their series (Cycle.Append).
func (s *Storage) store(b *Batch) Rejection {
	var rej Rejection
	now := s.clock.mono()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
	seq := s.batches
	prev := s.lastBatch[b.Key].ts
	var newest int64 // this batch's newest sample time: a clock set back lowers it, so it is not max'ed with prev

	for i := range b.Nodes {
		smp := &b.Nodes[i]
		sr := s.nodes[smp.Node]
		if sr == nil {
			sr = newSeries(s.opts.History)
			s.nodes[smp.Node] = sr
		}
		if sr.batch != seq {
			s.touchNode(smp.Node)
		}
		if s.record(sr, b, &smp.Sample, seq, now, prev, &rej) {
			rej.Example = describe(smp.Node, &smp.Sample)
		}
		s.judgeNode(smp, sr, &rej)
		newest = max(newest, nanosOrZero(smp.Timestamp))
	}
	touched := s.touched[:0]
	for i := range b.Containers {
		smp := &b.Containers[i]
		key := podKey{smp.Namespace, smp.Pod}
		p := s.slots.get(key)
		if p == nil {
			// Not bound (PodBound): deleted (a kubelet reports a terminating pod for a while), or not Running yet.
			// Which pods exist is the informer's to say; keeping it would only bring back what PodDeleted dropped.
			continue
		}
		if b.Key != "" && p.node != b.Key {
			// Bound to another node: its samples would mix with that node's in one ring. Cluster-wide batches
			// (Prometheus, key "") carry no node to check.
			s.foreign(smp, p, &rej)
			continue
		}
		if p.predates(&smp.Sample) {
			predecessor(smp, &rej)
			continue
		}
		if p.batch != seq {
			s.touchPod(p.slot)
			p.batch = seq
			touched = append(touched, smp)
		}
		sr := p.series(smp.Container, s.opts.History)
		if s.record(sr, b, &smp.Sample, seq, now, prev, &rej) {
			rej.Example = describe(smp.Namespace+"/"+smp.Pod+"/"+smp.Container, &smp.Sample)
		}
		newest = max(newest, nanosOrZero(smp.Timestamp))
	}
	for _, smp := range touched { // once its batch's containers are in: a pod's plausibility is their sum's
		s.judgePod(smp, seq, &rej)
	}
	clear(touched) // the batch's: do not keep it alive
	s.touched = touched[:0]
	if newest == 0 {
		newest = prev // no samples: the previous batch is still the newest one
	}
	s.lastBatch[b.Key] = batchMark{ts: newest, seen: now}
	count(rej)
	return rej
}

// count adds a batch's rejections to the self-metrics.
func count(rej Rejection) {
	for reason, n := range map[string]int{"foreign": rej.Foreign, "invalid": rej.Invalid, "zero": rej.Zero,
		"invalid_swap": rej.InvalidSwap, "implausible": rej.Implausible, "invalid_start": rej.InvalidStart,
		"predecessor": rej.Predecessor} {
		if n > 0 {
			samplesRejected.WithLabelValues(reason).Add(float64(n))
		}
	}
}

// record validates one sample and appends it to its series. It reports whether the sample is the batch's first
// rejected one, so the caller names it (only then: building names per sample would allocate).
func (s *Storage) record(sr *series, b *Batch, smp *Sample, seq uint64, now, prev int64, rej *Rejection) bool {
	sr.batch = seq
	ts, inRange := sampleNanos(smp.Timestamp)
	invalid, zero := validate(b.CPU, smp)
	invalid = invalid || !inRange // a time UnixNano would wrap: no arithmetic on it
	sr.bad = invalid || zero
	if !sr.bad {
		start, badStart := startNanos(smp.StartTime, ts)
		swap, badSwap := validSwap(smp)
		if sr.add(point{ts: ts, cpu: smp.CPU}, start, b.CPU, b.Window, prev, int64(s.opts.StaleAfter)) {
			sr.seen = now // staleness counts from the newest new sample, not from repeats or ignored ones
			sr.mem, sr.swap = smp.Memory, swap
		}
		if badStart {
			rej.InvalidStart++
		}
		if badSwap {
			rej.InvalidSwap++
		}
		return (badStart || badSwap) && rej.Example == ""
	}
	sr.seen = now // a rejected series is not served anyway; kept, it is not reallocated at every report
	if invalid {
		rej.Invalid++
	} else {
		rej.Zero++
	}
	return rej.Example == ""
}

// nanosOrZero is a sample time in Unix nanoseconds, 0 when out of range (sampleNanos).
func nanosOrZero(t time.Time) int64 {
	ns, _ := sampleNanos(t)
	return ns
}

// foreign counts a container sample of a pod bound to another node than the batch's. Called with s.mu held.
func (s *Storage) foreign(smp *ContainerSample, p *pod, rej *Rejection) {
	rej.Foreign++
	if rej.ForeignPod == "" { // only the first: building names per sample would allocate
		rej.ForeignPod = smp.Namespace + "/" + smp.Pod + " (bound to node " + strconv.Quote(p.node) + ")"
	}
}

// series returns the container's series, creating it when new.
func (p *pod) series(name string, history int) *series {
	for i := range p.containers {
		if p.containers[i].name == name {
			return p.containers[i].series
		}
	}
	sr := newSeries(history)
	i, _ := slices.BinarySearchFunc(p.containers, name, func(c container, name string) int {
		return strings.Compare(c.name, name)
	})
	p.containers = slices.Insert(p.containers, i, container{name: name, series: sr})
	return sr
}
