package storage

import "time"

// addPod starts keeping a pod bound to node. Called with s.mu held.
func (s *Storage) addPod(key podKey, node string) *pod {
	p := &pod{node: node}
	s.slots.add(key, p)
	s.touchPod(p.slot)
	return p
}

// PodObject is one pod object as the pod informer knows it, in plain values (storage imports no API types).
type PodObject struct {
	Namespace, Name string
	// Node is the node it is bound to (spec.nodeName): only that node's kubelet reports its samples.
	Node string
	// UID identifies the object (cmd passes a hash of metadata.uid); 0 when unknown. Another under the same name
	// is another pod: its predecessor's series go at once.
	UID uint64
	// Created is when the object began: its status.startTime (when its kubelet first handled it, on the node's
	// clock like the kubelet's samples), else its metadata.creationTimestamp; zero when unknown or when the pod is
	// older than its object (a static pod's mirror), which exempts it from the predecessor rule (creationSkew).
	Created time.Time
}

// creationSkew is how far before a pod object began (PodObject.Created) a sample may be stamped, or a container of
// it may have started, and still be the pod's. The kubelet's pod start time and its samples share the node's clock;
// a creation time (no start time known) and a Prometheus evaluation time are other clocks, and every one of them is
// truncated to the second, which only widens the margin. Too small, a node whose clock lags by more than it would
// have its new pods' containers all taken for predecessors, and none served; too large, a predecessor that ran
// for less than it before its successor began would be served as the successor for a scrape or two. Clocks kept by
// NTP disagree by milliseconds; 5 s tolerates a badly kept one, and a predecessor that lived less than 5 s is rare.
const creationSkew = 5 * time.Second

// BindPod tells storage that a pod object is Running on its node (the pod informer's add and update events): from
// then on its samples are stored, taken from that node's batches only, and only those measured for this object:
// none stamped before it was created, none of a container started before it (PodObject.Created), which a kubelet
// may still report for a predecessor under the name (a force-deleted pod's containers outlive their object). A pod
// bound to another node than storage knew (a deletion missed, then the name reused elsewhere), or another object
// under the name (a UID seen to change on an update), starts afresh: two objects' samples never share a ring.
func (s *Storage) BindPod(o PodObject) {
	key := podKey{o.Namespace, o.Name}
	var created int64
	if ns, ok := sampleNanos(o.Created); ok {
		created = ns - int64(creationSkew)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch p := s.slots.get(key); {
	case p == nil:
		p = s.addPod(key, o.Node)
		p.object, p.created = o.UID, created
	case p.node != o.Node || (o.UID != 0 && p.object != 0 && o.UID != p.object):
		seriesPruned.WithLabelValues("deleted").Add(float64(len(p.containers)))
		p.node, p.containers, p.object, p.created, p.implausible = o.Node, nil, o.UID, created, false
		s.touchPod(p.slot)
		if _, served := s.view.Load().Pod(o.Namespace, o.Name); served && s.health.Cycles > 0 {
			// A removal of the predecessor, as PodDeleted's: readers' builds that list it must not be reused
			// (Removals). Published below, at once.
			s.countRemoval(Removal{Namespace: o.Namespace, Name: o.Name})
		}
	case o.UID != 0:
		if p.object != o.UID {
			s.touchPod(p.slot) // the next publication's point names its object
		}
		p.object, p.created = o.UID, created // known from now on
		return
	default:
		return
	}
	// Another object under the name: the published snapshot may still hold its predecessor's point, which the API
	// would join with the new object (the informer lists it before this event). Publish at once, not at the next
	// commit (a resolution later): only re-creations under a name cost this (deletions are published a burst at a
	// time, removals.go).
	if _, stale := s.view.Load().Pod(o.Namespace, o.Name); stale && s.health.Cycles > 0 {
		s.publish(s.buildInterim(s.view.Load()), false, s.clock.mono())
	}
}

// PodBound binds a pod whose object storage does not know (BindPod with no UID and no creation time).
func (s *Storage) PodBound(namespace, name, node string) {
	s.BindPod(PodObject{Namespace: namespace, Name: name, Node: node})
}

// predates reports whether a sample is of the pod's predecessor under its name: stamped, or of a container
// started, before the pod object was created (less creationSkew).
func (p *pod) predates(smp *Sample) bool {
	if p.created == 0 {
		return false
	}
	c := time.Unix(0, p.created)
	return smp.Timestamp.Before(c) || (!smp.StartTime.IsZero() && smp.StartTime.Before(c))
}

// predecessor counts a container sample of a pod's predecessor.
func predecessor(smp *ContainerSample, rej *Rejection) {
	rej.Predecessor++
	if rej.PredecessorPod == "" { // only the first: building names per sample would allocate
		rej.PredecessorPod = smp.Namespace + "/" + smp.Pod
	}
}

// NodeCapacity tells storage what a node can physically do (the node informer's add and update events, from
// status.capacity): no value above it is served for the node, nor for a pod or container on it. A zero field is
// unknown, and bounds nothing.
func (s *Storage) NodeCapacity(name string, c Capacity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c == (Capacity{}) {
		delete(s.capacity, name)
		return
	}
	s.capacity[name] = c
}

// NodeDeleted drops a deleted node's series at once, and publishes that (removed); cmd calls it from the node
// informer's delete events. The node's pods go by their own delete events.
func (s *Storage) NodeDeleted(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.capacity, name)
	if _, ok := s.nodes[name]; ok {
		_, served := s.view.Load().Node(name)
		seriesPruned.WithLabelValues("deleted").Inc()
		delete(s.nodes, name)
		s.touchNode(name)
		s.removed(Removal{Name: name}, served)
	}
}

// PodDeleted drops the series of a pod that was deleted (or stopped Running) at once, and publishes that
// (removed); cmd calls it from the pod informer's delete events, so that no cycle has to look every pod up
// (BENCHMARKS.md, "Figures behind the comments", has what that cost).
func (s *Storage) PodDeleted(namespace, name string) {
	key := podKey{namespace, name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.slots.get(key); p != nil {
		_, served := s.view.Load().Pod(namespace, name)
		s.dropPod(key, p, "deleted")
		s.removed(Removal{Namespace: namespace, Name: name}, served)
	}
}

// dropPod forgets a pod's series, counting them as pruned for reason. Called with s.mu held.
func (s *Storage) dropPod(key podKey, p *pod, reason string) {
	seriesPruned.WithLabelValues(reason).Add(float64(len(p.containers)))
	s.touchPod(p.slot)
	s.slots.remove(key, p)
}
