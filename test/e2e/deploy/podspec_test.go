package deploy

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// checkSecure: non-root, read-only root filesystem, no privilege escalation, no capabilities, RuntimeDefault
// seccomp, set on the container or inherited from the pod.
func checkSecure(pod corev1.PodSpec, c corev1.Container) []error {
	var errs []error
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if sc == nil {
		return []error{fmt.Errorf("container %s has no securityContext", c.Name)}
	}
	if nonRoot := firstSet(sc.RunAsNonRoot, psc.RunAsNonRoot); nonRoot == nil || !*nonRoot {
		errs = append(errs, fmt.Errorf("container %s may run as root (runAsNonRoot unset)", c.Name))
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		errs = append(errs, fmt.Errorf("container %s root filesystem is writable", c.Name))
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || (sc.Privileged != nil && *sc.Privileged) {
		errs = append(errs, fmt.Errorf("container %s may escalate privileges", c.Name))
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		errs = append(errs, fmt.Errorf("container %s must drop ALL capabilities and add none: %+v", c.Name, sc.Capabilities))
	}
	sp := sc.SeccompProfile
	if sp == nil {
		sp = psc.SeccompProfile
	}
	if sp == nil || sp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		errs = append(errs, fmt.Errorf("container %s seccomp profile %+v, want RuntimeDefault", c.Name, sp))
	}
	return errs
}

// checkProbes: liveness on /livez and readiness on /readyz over HTTPS on the serving port.
func checkProbes(c corev1.Container) []error {
	var errs []error
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"liveness", "/livez", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			errs = append(errs, fmt.Errorf("container %s has no %s HTTP probe", c.Name, p.kind))
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || g.Scheme != corev1.URISchemeHTTPS || resolvePort(c, g.Port) == 0 || resolvePort(c, g.Port) != containerPort(c, "https") {
			errs = append(errs, fmt.Errorf("container %s %s probe %s %s port %s, want HTTPS %s on the https port", c.Name, p.kind, g.Scheme, g.Path, g.Port.String(), p.path))
		}
	}
	return errs
}

// checkHA: a PodDisruptionBudget keeping one replica, required anti-affinity per node and a topology spread
// constraint, each selecting the Deployment's pods.
func checkHA(o *objects, pod corev1.PodSpec, podLabels labels.Set) []error {
	var errs []error
	selects := func(what string, ls *metav1.LabelSelector) {
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil || ls == nil || s.Empty() || !s.Matches(podLabels) {
			errs = append(errs, fmt.Errorf("%s selector %v does not select the pods %v (%v)", what, ls, podLabels, err))
		}
	}
	if len(o.pdbs) != 1 {
		errs = append(errs, fmt.Errorf("%d PodDisruptionBudgets, want 1", len(o.pdbs)))
	} else {
		pdb := o.pdbs[0]
		selects("PodDisruptionBudget", pdb.Spec.Selector)
		if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
			errs = append(errs, fmt.Errorf("PodDisruptionBudget minAvailable %v, want 1", pdb.Spec.MinAvailable))
		}
	}
	var anti []corev1.PodAffinityTerm
	if pod.Affinity != nil && pod.Affinity.PodAntiAffinity != nil {
		anti = pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	if len(anti) != 1 || anti[0].TopologyKey != corev1.LabelHostname {
		errs = append(errs, fmt.Errorf("want one required pod anti-affinity term on %s, got %+v", corev1.LabelHostname, anti))
	} else {
		selects("pod anti-affinity", anti[0].LabelSelector)
	}
	if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].TopologyKey != corev1.LabelTopologyZone {
		errs = append(errs, fmt.Errorf("want one topology spread constraint on %s, got %+v", corev1.LabelTopologyZone, pod.TopologySpreadConstraints))
	} else {
		selects("topology spread", pod.TopologySpreadConstraints[0].LabelSelector)
	}
	return errs
}

func firstSet(v ...*bool) *bool {
	for _, b := range v {
		if b != nil {
			return b
		}
	}
	return nil
}
