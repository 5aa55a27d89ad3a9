package storage

import (
	"cmp"
	"math"
	"time"
)

// CPUKind says how a batch's CPU values are to be read.
type CPUKind uint8

const (
	// CPUCumulative values are counters in core-seconds (the kubelet's container_cpu_usage_seconds_total); the
	// served usage is the rate between two samples of the ring.
	CPUCumulative CPUKind = iota
	// CPURate values are already an average in cores over Batch.Window (a PromQL rate()).
	CPURate
)

// Sample is one observation of one series, as a source read it.
type Sample struct {
	// Timestamp is the source's own sample time (the kubelet's stats time, Prometheus' evaluation time).
	Timestamp time.Time
	// StartTime is when the container or node started; zero when unknown. Any change of a known one (forward or
	// back, from the last known) is a restart and starts the series afresh; unknown is no restart. One after
	// Timestamp, or more than 100 years before it, is invalid and read as unknown (Rejection.InvalidStart).
	StartTime time.Time
	// CPU is core-seconds (CPUCumulative) or cores (CPURate).
	CPU float64
	// Memory is the working set in bytes.
	Memory float64
	// Swap is the swap usage in bytes, when HasSwap: sources that report no swap (Windows nodes, older kubelets, a
	// Prometheus without the series) leave HasSwap false, and nothing is served for it. 0 is a true value.
	Swap    float64
	HasSwap bool
}

// NodeSample is a Sample of a node.
type NodeSample struct {
	Node string
	Sample
}

// ContainerSample is a Sample of a container.
type ContainerSample struct {
	Namespace, Pod, Container string
	Sample
}

// Batch is what one source call produced: one node's kubelet response, or one cluster-wide Prometheus poll. The
// slices are only read during Cycle.Append, so a source may reuse one Batch between calls.
type Batch struct {
	// Key names what the batch covers (the node name for the kubelet, "" for a cluster-wide poll). A container first
	// seen in a CPUCumulative batch whose start time is after Storage.newAfter of the previous batch of the same key
	// (one resolution before it) counts from zero at its start, once it has run minFreshSpan; CPURate samples are
	// servable at their first, so the Prometheus source's batches of one key need not be told apart.
	Key string
	// CPU says how to read the CPU values of every sample in the batch.
	CPU CPUKind
	// Window is the averaging window of CPURate values.
	Window time.Duration
	// Nodes and Containers are the samples. Containers of one pod must all come in the same batch.
	Nodes      []NodeSample
	Containers []ContainerSample
}

// Rejection counts the samples of a Cycle.Append call that were not kept, by reason, so the source can report them with
// its own context (which node, which query).
type Rejection struct {
	// Invalid counts samples with NaN, infinite or negative values.
	Invalid int
	// Zero counts cumulative CPU counters or working sets of exactly zero: a broken source (cgroup v2 misconfigured).
	Zero int
	// InvalidSwap counts samples whose swap value was NaN, infinite or negative: their CPU and memory are kept and
	// served, their swap is not (DESIGN.md section 2).
	InvalidSwap int
	// Example describes one sample rejected as invalid or zero, or with an invalid swap value, for a log line.
	Example string
	// Foreign counts container samples of pods bound to another node than the batch's (DESIGN.md section 2, "Whose
	// samples count"): the old node of a pod recreated elsewhere under its name, or a forged report.
	Foreign int
	// ForeignPod names one such pod and the node it is bound to, for a log line.
	ForeignPod string
	// Implausible counts samples whose node, container or pod would be served above what the node can physically
	// do (its capacity, see NodeCapacity, with a 10 % margin): not served (DESIGN.md section 2, "Plausibility").
	Implausible int
	// InvalidStart counts samples whose start time was after the sample, or more than 100 years before it: kept,
	// with the start read as unknown.
	InvalidStart int
	// Predecessor counts container samples of a pod's predecessor under its name: stamped, or of a container
	// started, before the pod object was created (PodObject.Created, less 5 s of clock skew). Like Foreign ones, their
	// values may well be true, of another object.
	Predecessor int
	// PredecessorPod names one such pod, for a log line.
	PredecessorPod string
}

// Total is the number of samples rejected for their values (invalid, zero or implausible, or only their swap or
// start time invalid); Foreign and Predecessor ones are apart, since the values may well be true, of a pod that
// is no longer there.
func (r Rejection) Total() int {
	return r.Invalid + r.Zero + r.InvalidSwap + r.Implausible + r.InvalidStart
}

// Add adds the counts of o to r, keeping r's examples when it has them.
func (r *Rejection) Add(o Rejection) {
	r.Invalid += o.Invalid
	r.Zero += o.Zero
	r.InvalidSwap += o.InvalidSwap
	r.Foreign += o.Foreign
	r.Implausible += o.Implausible
	r.InvalidStart += o.InvalidStart
	r.Predecessor += o.Predecessor
	r.Example = cmp.Or(r.Example, o.Example)
	r.ForeignPod = cmp.Or(r.ForeignPod, o.ForeignPod)
	r.PredecessorPod = cmp.Or(r.PredecessorPod, o.PredecessorPod)
}

// Usage is what is served for one node or container.
type Usage struct {
	// CPU is the average usage over the window, in nanocores.
	CPU uint64
	// Memory is the working set at the newest sample, in bytes.
	Memory uint64
	// swap is the swap usage at the newest sample in bytes plus one, 0 when there is none (the source reported no
	// swap for that sample, or an invalid value): a zero Usage has no swap, and a view keeps 8 bytes a container
	// for it rather than 16 with a separate flag. Read and set it with Swap and WithSwap.
	swap uint64
}

// Swap returns the swap usage in bytes, and whether there is one: 0 with ok is nothing swapped, !ok is unknown.
func (u Usage) Swap() (bytes uint64, ok bool) {
	if u.swap == 0 {
		return 0, false
	}
	return u.swap - 1, true
}

// WithSwap returns u with a swap usage of bytes (saturating at 2^64-2 bytes, far beyond any machine).
func (u Usage) WithSwap(bytes uint64) Usage {
	u.swap = min(bytes, math.MaxUint64-1) + 1
	return u
}

// NodePoint is the servable metrics of one node.
type NodePoint struct {
	Timestamp time.Time
	Window    time.Duration
	Usage
}

// ContainerPoint is the servable metrics of one container.
type ContainerPoint struct {
	Name string
	Usage
}

// PodPoint is the servable metrics of one pod: every container that reported at the pod's newest sample, sorted by
// name; Usages[i] is the container Names[i]'s. They are two slices, not one of ContainerPoint, so that a snapshot
// keeps its usages in memory without pointers and shares one set of names with the snapshots before it
// (view.go). Both are the snapshot's: callers must not modify them.
type PodPoint struct {
	Timestamp time.Time
	Window    time.Duration
	Names     []string
	Usages    []Usage
	// UID is the pod object the samples were measured for, as cmd named it to storage (PodObject.UID: a hash of its
	// metadata.uid, this process's only, not comparable across replicas or restarts), 0 when unknown. A reader that joins
	// the point with the informer's object under the name must check they are one: a pod deleted and re-created
	// under its name reaches the informer before storage publishes the predecessor's removal (removals.go).
	UID uint64
}

// Containers returns the pod's containers as ContainerPoint values, in a new slice.
func (p PodPoint) Containers() []ContainerPoint {
	cs := make([]ContainerPoint, len(p.Names))
	for i, name := range p.Names {
		cs[i] = ContainerPoint{Name: name, Usage: p.Usages[i]}
	}
	return cs
}

// Health is the source's collection health, for /readyz and the 503 of DESIGN.md section 3.
type Health struct {
	// Source names the source ("kubelet", "prometheus").
	Source string
	// Cycles is the number of finished collection cycles.
	Cycles uint64
	// LastCycle is when the newest cycle finished; zero before the first.
	LastCycle time.Time
	// LastSuccess is when the newest successful cycle finished; zero before the first.
	LastSuccess time.Time
	// LastError is the newest cycle's error, nil after a clean cycle.
	LastError error
	// Listed and Reached are how many nodes the newest cycle was to collect and how many returned data, and
	// Servable how many nodes its snapshot serves; Listed is 0 when the source does not count nodes (Prometheus
	// reaches the cluster in one query).
	Listed, Reached, Servable int
	// Complete is when the first cycle finished whose snapshot served every listed node (or, for a source that
	// does not count nodes, the first successful one); zero before. Readiness waits for it, within a bound.
	Complete time.Time
}
