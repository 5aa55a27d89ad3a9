package scraper

import (
	"k8s.io/klog/v2"

	"github.com/metrics-ring/metrics-ring/pkg/logonly"
	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// logRejections logs what storage did not keep of a node's response, once per streak of each kind: values it
// will not serve (zero, invalid, implausible), pods bound to other nodes, predecessors of pods under their names.
func (s *nodeState) logRejections(ref klog.ObjectRef, rej storage.Rejection) {
	switch s.rejecting.Set(rej.Total() > 0) {
	case logonly.Began:
		klog.ErrorS(nil, "Kubelet sent zero, invalid or implausible values; they are not served", "node", ref,
			"invalid", rej.Invalid, "zero", rej.Zero, "implausible", rej.Implausible, "invalidSwap",
			rej.InvalidSwap, "invalidStartTime", rej.InvalidStart, "example", rej.Example)
	case logonly.Ended:
		klog.InfoS("Kubelet values are valid again", "node", ref)
	}
	switch s.foreign.Set(rej.Foreign > 0) {
	case logonly.Began:
		klog.InfoS("Kubelet reports pods bound to other nodes; their samples are dropped", "node", ref,
			"samples", rej.Foreign, "example", rej.ForeignPod)
	case logonly.Ended:
		klog.InfoS("Kubelet no longer reports pods of other nodes", "node", ref)
	}
	switch s.predecessor.Set(rej.Predecessor > 0) {
	case logonly.Began:
		klog.InfoS("Kubelet reports samples of pods older than the pods now under their names; they are dropped",
			"node", ref, "samples", rej.Predecessor, "example", rej.PredecessorPod)
	case logonly.Ended:
		klog.InfoS("Kubelet no longer reports samples of pods' predecessors", "node", ref)
	}
}
