package deploy

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// checkRollout: a rolling update keeps a replica serving throughout, a single replica is replaced only once its
// successor is ready (README: maxUnavailable 0), and the rollout can progress on as few nodes as there are
// replicas when required anti-affinity allows one replica per node: there a surge pod has no node to go to, so
// an old replica must go first.
func checkRollout(d appsv1.Deployment, pod corev1.PodSpec) []error {
	replicas := int(ptr.Deref(d.Spec.Replicas, 1))
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxSurge == nil || ru.MaxUnavailable == nil {
		return []error{fmt.Errorf("Deployment %s strategy %+v, want a defaulted RollingUpdate", d.Name, d.Spec.Strategy)}
	}
	// Rounded as the Deployment controller rounds them: surge up, unavailable down.
	surge, err1 := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, replicas, true)
	unavailable, err2 := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, replicas, false)
	if err1 != nil || err2 != nil {
		return []error{fmt.Errorf("Deployment %s rolling update %+v: %v %v", d.Name, ru, err1, err2)}
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("Deployment %s: "+format, append([]any{d.Name}, args...)...))
	}
	if replicas-unavailable < 1 {
		fail("maxUnavailable %d of %d replicas leaves none serving during a rollout", unavailable, replicas)
	}
	if replicas == 1 && unavailable != 0 {
		fail("one replica must roll with maxUnavailable 0, so the old pod serves until the new one is ready")
	}
	if onePerNode(pod) {
		if surge > 0 {
			fail("one replica per node (required anti-affinity) and maxSurge %d: on %d nodes the surge pod cannot be scheduled and the rollout stalls; use maxSurge 0, maxUnavailable 1", surge, replicas)
		}
		if unavailable < 1 {
			fail("one replica per node and maxUnavailable 0: on %d nodes no old pod makes room for a new one", replicas)
		}
	}
	return errs
}

// onePerNode reports whether the pods' required anti-affinity keeps two of them off one node.
func onePerNode(pod corev1.PodSpec) bool {
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, term := range pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey == corev1.LabelHostname {
			return true
		}
	}
	return false
}

// checkShutdown: the container keeps serving for a --shutdown-delay-duration while endpoints drain, and the
// pod's termination grace period leaves at least 10 s after it for in-flight requests.
func checkShutdown(pod corev1.PodSpec, c corev1.Container) []error {
	delay, err := time.ParseDuration(argValue(c.Args, "--shutdown-delay-duration"))
	if err != nil || delay <= 0 {
		return []error{fmt.Errorf("container %s: want a positive --shutdown-delay-duration, so endpoints drain before it stops serving (%v)", c.Name, err)}
	}
	grace := time.Duration(ptr.Deref(pod.TerminationGracePeriodSeconds, 30)) * time.Second
	if grace < delay+10*time.Second {
		return []error{fmt.Errorf("terminationGracePeriodSeconds %v leaves less than 10 s after --shutdown-delay-duration=%v", grace, delay)}
	}
	return nil
}

// checkMemory: a memory limit at least the request, and GOMEMLIMIT, as the kubelet would set it, a little under
// the limit (room for memory the Go runtime does not count) and following it when the limit changes.
func checkMemory(c corev1.Container) []error {
	limit := c.Resources.Limits.Memory()
	if limit.IsZero() || limit.Cmp(*c.Resources.Requests.Memory()) < 0 {
		return []error{fmt.Errorf("container %s: memory limit %v, want one at least the request %v", c.Name, limit, c.Resources.Requests.Memory())}
	}
	var errs []error
	for _, scale := range []int64{1, 3} { // as shipped, and as an operator might raise it
		l := resource.NewQuantity(limit.Value()*scale, resource.BinarySI)
		got, err := goMemLimit(c, *l)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("container %s: %w", c.Name, err))
		case got > l.Value() || float64(got) < 0.85*float64(l.Value()):
			errs = append(errs, fmt.Errorf("container %s: with a memory limit of %v, GOMEMLIMIT is %d bytes (%.1f %%), want 85 to 100 %% of it",
				c.Name, l, got, 100*float64(got)/float64(l.Value())))
		}
	}
	return errs
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// goMemLimit resolves c's environment as the kubelet does, given the memory limit (resourceFieldRef values
// rounded up to their divisor, $(VAR) references to variables defined before), and returns GOMEMLIMIT in bytes
// as the Go runtime parses it (an integer with an optional B, KiB, MiB, GiB or TiB suffix).
func goMemLimit(c corev1.Container, limit resource.Quantity) (int64, error) {
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			ref := e.ValueFrom.ResourceFieldRef
			if ref.Resource != "limits.memory" {
				continue
			}
			divisor := int64(1)
			if !ref.Divisor.IsZero() {
				divisor = ref.Divisor.Value()
			}
			vars[e.Name] = strconv.FormatInt(int64(math.Ceil(float64(limit.Value())/float64(divisor))), 10)
		case e.ValueFrom == nil:
			vars[e.Name] = envRef.ReplaceAllStringFunc(e.Value, func(ref string) string {
				if v, ok := vars[envRef.FindStringSubmatch(ref)[1]]; ok {
					return v
				}
				return ref
			})
		}
	}
	v, ok := vars["GOMEMLIMIT"]
	if !ok {
		return 0, fmt.Errorf("no GOMEMLIMIT in the environment %+v", c.Env)
	}
	units := []struct {
		suffix string
		bytes  int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("GOMEMLIMIT %q is not what Go reads (bytes, with an optional unit suffix)", vars["GOMEMLIMIT"])
	}
	return n * mult, nil
}
