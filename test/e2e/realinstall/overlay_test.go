package realinstall

import "testing"

// TestKubeletOverlayOnRealNode: manifests/overlays/kubelet, with the user's image override, runs as a pod of the
// image built here behind both APIServices; kubectl top shows the node's truth, and a rollout restart fails no
// kubectl top.
func TestKubeletOverlayOnRealNode(t *testing.T) {
	needNode(t)
	ensureInstalled(t, overlay)
	topShowsTruth(t)
	rolloutKeepsServing(t)
}
