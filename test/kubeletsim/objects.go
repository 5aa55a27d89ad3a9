package kubeletsim

import (
	"context"
	"fmt"
	"maps"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Every simulated node's size, as published in the Node's capacity and in cAdvisor's machine metrics.
const (
	nodeCPUCores    = 32
	nodeMemoryBytes = 128 << 30
	// NodeSwapBytes is every node's swap capacity, published in status.nodeInfo.swap.capacity as a kubelet with
	// swap does (kubectl top nodes --show-swap divides by it).
	NodeSwapBytes = 8 << 30
)

func (s *Sim) nodeObject(n *node) *corev1.Node {
	s.mu.RLock()
	port := n.port
	s.mu.RUnlock()
	now := metav1.Now()
	maxPods := s.podCapacity()
	swapCapacity := int64(NodeSwapBytes)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(nodeCPUCores, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(nodeMemoryBytes, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{
			"kubernetes.io/hostname": n.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"node.kubernetes.io/instance-type": "kubeletsim",
		}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", Message: "kubelet is posting ready status (simulated)",
				LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: s.cfg.Host},
				{Type: corev1.NodeHostName, Address: n.name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OperatingSystem: "linux",
				Architecture: "amd64", ContainerRuntimeVersion: "containerd://2.1.0", OSImage: "kubeletsim",
				Swap: &corev1.NodeSwapStatus{Capacity: &swapCapacity}},
		},
	}
}

// podObject is the spec of a pod of the default workload; requests are set so an HPA on CPU utilization works.
func (s *Sim) podObject(p *pod) *corev1.Pod {
	no := false
	var zero int64
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: maps.Clone(p.labels),
			OwnerReferences: s.ownersOf(p)},
		Spec: corev1.PodSpec{NodeName: p.node.name, AutomountServiceAccountToken: &no,
			TerminationGracePeriodSeconds: &zero},
	}
	for _, c := range p.containers {
		obj.Spec.Containers = append(obj.Spec.Containers, corev1.Container{Name: c.name, Image: c.image,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("64Mi"),
			}}})
	}
	return obj
}

// setPodStatus writes what a kubelet reports for a pod whose containers all run: Running, Ready, started at the
// sim's start time (well in the past: the HPA ignores the CPU of pods in their first minutes).
func (s *Sim) setPodStatus(obj *corev1.Pod, p *pod) {
	p.node.mu.Lock() // restarts change container start times (OpRestart)
	defer p.node.mu.Unlock()
	start := metav1.NewTime(p.start)
	yes := true
	ip := podIP(p.uid)
	st := &obj.Status
	st.Phase = corev1.PodRunning
	st.HostIP, st.HostIPs = s.cfg.Host, []corev1.HostIP{{IP: s.cfg.Host}}
	st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	st.StartTime = &start
	st.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized,
		corev1.ContainersReady, corev1.PodReady} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue,
			LastTransitionTime: start})
	}
	st.ContainerStatuses = nil
	for _, c := range p.containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.name, Image: c.image, ImageID: c.image, ContainerID: "containerd://" + c.id,
			Ready: true, Started: &yes, RestartCount: c.restarts,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.start)}},
		})
	}
}

// podIP derives a stable 10.x.y.z address from the pod's UID.
func podIP(uid string) string {
	var h uint32 = 2166136261
	for i := 0; i < len(uid); i++ {
		h = (h ^ uint32(uid[i])) * 16777619
	}
	return net.IPv4(10, byte(h>>16), byte(h>>8), byte(h)|1).String()
}

// AddPod adopts a pod someone else created (a ReplicaSet, say; there is no scheduler here): binds it to node
// through pods/binding when it has no node yet, starts serving its containers (each using cpuCores and
// memoryBytes, started 2 h ago) and writes it Running and Ready through /status. node may be "" for a pod that
// already has spec.nodeName.
func (s *Sim) AddPod(ctx context.Context, c kubernetes.Interface, node string, obj *corev1.Pod,
	cpuCores float64, memoryBytes uint64) error {
	return s.AddPodStarted(ctx, c, node, obj, cpuCores, memoryBytes, timeNow().Add(-2*time.Hour))
}

// AddPodStarted is AddPod with the pod started at start (its status.startTime) and every container with it: a
// pod re-created under a name, whose containers must not look older than the pod.
func (s *Sim) AddPodStarted(ctx context.Context, c kubernetes.Interface, node string, obj *corev1.Pod,
	cpuCores float64, memoryBytes uint64, start time.Time) error {
	rate, err := nanoCores(cpuCores)
	if err != nil {
		return err
	}
	target := obj.Spec.NodeName
	if target == "" {
		target = node
	} else if node != "" && node != target {
		return fmt.Errorf("kubeletsim: pod %s/%s is on node %s, not %s", obj.Namespace, obj.Name, target, node)
	}
	n, ok := s.byName[target]
	if !ok {
		return fmt.Errorf("kubeletsim: pod %s/%s: unknown node %q", obj.Namespace, obj.Name, target)
	}
	uid := string(obj.UID)
	if len(uid) < 36 {
		uid = fmt.Sprintf("00000000-0000-4000-9000-%012d", s.adopted.Add(1))
	}
	now := timeNow()
	p := &pod{namespace: obj.Namespace, name: obj.Name, uid: uid, node: n, start: start, labels: obj.Labels}
	for i, sc := range obj.Spec.Containers {
		cstart := p.start.Add(time.Duration(i) * time.Second)
		if cstart.After(now) {
			cstart = p.start // a container never starts in the future
		}
		p.containers = append(p.containers, newContainer(sc.Name, sc.Image, containerID(uid, i), cstart,
			now.UnixNano(), rate, memoryBytes))
	}
	s.mu.Lock()
	if _, dup := s.pods[key(p.namespace, p.name)]; dup {
		s.mu.Unlock()
		return fmt.Errorf("kubeletsim: pod %s/%s is already simulated", p.namespace, p.name)
	}
	s.putLocked(p)
	s.mu.Unlock()
	n.addPod(p, now.UnixNano())
	// Serve metrics before the pod turns Running, so whoever lists Running pods finds their metrics.
	if err := s.adoptInAPI(ctx, c, obj, p); err != nil {
		s.RemovePod(p.namespace, p.name)
		return err
	}
	return nil
}

func (s *Sim) adoptInAPI(ctx context.Context, c kubernetes.Interface, obj *corev1.Pod, p *pod) error {
	pods := c.CoreV1().Pods(p.namespace)
	if obj.Spec.NodeName == "" {
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, UID: obj.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: p.node.name}}
		if err := pods.Bind(ctx, b, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubeletsim: binding pod %s/%s to %s: %w", p.namespace, p.name, p.node.name, err)
		}
	}
	// Controllers update pods concurrently (labels, owner references): retry status writes on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.setPodStatus(cur, p)
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("kubeletsim: writing status of pod %s/%s: %w", p.namespace, p.name, err)
	}
	return nil
}
