package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metrics-ring/metrics-ring/test/framework"
)

const (
	realNodeName = "real-node"
	// burnPod burns a known CPU on the real node, so that kubectl top can be checked against it by eye.
	burnPod       = "burn-250m"
	burnMillicore = 250
)

// startRealNode starts a real kubelet beside the simulated fleet when this machine can run one (root, Linux,
// containerd and runc installable) and runs burnPod on it. It returns nil and says why on stderr when it
// cannot: the demo goes on with the simulated nodes alone.
func startRealNode(ctx context.Context, cp *framework.ControlPlane, dir string) *framework.RealNode {
	n, err := framework.StartRealNode(ctx, cp, realNodeName, dir, os.Stderr)
	if err != nil {
		if errors.Is(err, framework.ErrNoRealNode) {
			fmt.Fprintf(os.Stderr, "no real node in this demo: %v\n", err)
		} else {
			fmt.Fprintf(os.Stderr, "no real node in this demo: starting one failed: %v (logs in %s)\n", err, dir)
		}
		return nil
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: burnPod, Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeName: realNodeName, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "burn", Image: framework.WorkloadImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-millicores=" + strconv.Itoa(burnMillicore), "-memory-mib=32"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
		},
	}
	if _, err := cp.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "no real node in this demo: creating pod %s on it: %v\n", burnPod, err)
		n.Stop()
		return nil
	}
	fmt.Fprintf(os.Stderr, "real node %s Ready (kubelet %s); pod %s/%s burns %dm on it\n", realNodeName, n.KubeletVersion, pod.Namespace, burnPod, burnMillicore)
	return n
}

// kubeletCABundle is the simulator's CA and, with a real node, its kubelet's: metrics-ring verifies both.
func kubeletCABundle(dir string, simCA []byte, n *framework.RealNode) (string, error) {
	all := append([]byte(nil), simCA...)
	if n != nil {
		real, err := os.ReadFile(n.CAFile)
		if err != nil {
			return "", fmt.Errorf("reading the real kubelet's CA: %w", err)
		}
		all = append(all, real...)
	}
	path := filepath.Join(dir, "kubelet-ca.crt")
	if err := os.WriteFile(path, all, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// realNodeWait is how long kubectl top may take to show the real node's pod: its pod's first values come a
// housekeeping interval (about 10 s) after it starts, and the pod's start takes a while on a loaded machine.
const realNodeWait = 3 * time.Minute
