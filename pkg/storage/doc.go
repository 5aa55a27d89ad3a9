// Package storage owns metrics-ring's data model: a ring of recent samples per series (node or container), and the
// snapshots of what is servable that the API reads as NodePoint and PodPoint values.
//
// Writing is one collection cycle at a time, driven by pkg/collect's loop: BeginCycle; the source hands each batch
// (one node's kubelet response, or one cluster-wide Prometheus poll) to Cycle.Append, which validates its samples
// and appends them to their series' rings under a mutex, a pod's only from the node it is bound to; Cycle.Commit
// records the cycle's outcome as the source's health, prunes what went stale and publishes a new Snapshot with one
// atomic pointer swap, so readers never wait on a collection. Meanwhile the loop calls Cycle.Publish every second,
// which publishes what has landed so far (at most once a second, with the previous commit's health), so a sample is
// servable about a second after its node answered, not when the cycle's slowest node has; such an interim snapshot
// recomputes only what changed since the previous one, and keeps only that: its pods are a patch over the previous
// snapshot's.
//
// Which objects exist comes from the informers' events alone, passed on by cmd: BindPod (a pod object Running on a
// node: its samples, and only those measured for that object, are stored from then on), PodDeleted and NodeDeleted
// (its series dropped, and that published, at once; Removals counts them, RemovedAfter names the latest ones),
// NodeCapacity (what the node can do: no value above it is served). Storage never asks a lister. Staleness is a rule
// of the data: a series not fed a new sample within --stale-after is dropped.
//
// Reading is one atomic load: Latest (or Resolve, the retained snapshot a generation names) returns a Snapshot that
// needs nothing else: the values, the time each turns stale, the generation (the API's resourceVersion), the
// source's health and the 503 decision (Unavailable). How long a snapshot is retained is storage's business (it
// says so: Retained): a reader that needs one kept longer (a page-through, a watch) holds a Handle on it (Hold) and
// releases it when done.
//
// The write path (Cycle.Append to a series' ring) and the read path (a view built at a publication, read through
// its Snapshot) keep to files of their own. A view keeps its pods in a pointer-free slice numbered by storage's only
// map of its pods, and an interim view is a patch over the published one: what the garbage collector scans and a
// publication copies stays small in a large cluster.
package storage
