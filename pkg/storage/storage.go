package storage

import (
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
	// AfterFunc calls f once d has passed on Now's clock, on its own goroutine or, in a test with a fake clock, when
	// the test moves the clock (so f never reads the test's clock unsynchronised); default time.AfterFunc. Storage
	// uses it to publish removals that came too soon after a publication (removals.go).
	AfterFunc func(d time.Duration, f func())
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
	if o.AfterFunc == nil {
		o.AfterFunc = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
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
	// less creationSkew: samples stamped before it, or of containers started before it, are its predecessor's.
	// Both 0 when unknown.
	object      uint64
	created     int64
	slot        int32 // the pod's index in Storage.slots and in every view's pods
	implausible bool  // its newest report sums to more than its node can do: not served
}

// batchMark remembers a batch key's previous Append: its newest sample time, for fresh containers, and when it
// happened, for pruning.
type batchMark struct{ ts, seen int64 }

// container is the series of one of a pod's containers, by name.
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
	// removals counts the objects the informers' events dropped (Removals); removalDue says a publication of some is
	// scheduled (Options.AfterFunc) and not yet made.
	removals   atomic.Uint64
	removalDue bool
	removedLog removalLog // which objects the latest removals were (RemovedAfter)

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
	first.own.Store(true)
	s.view.Store(first)
	s.committed.Store(first)
	s.recent.Store(&[]*view{first})
	return s
}
