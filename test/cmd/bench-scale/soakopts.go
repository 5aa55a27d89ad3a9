package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// soakOptions are the soak phase's flags (issue 29): churn, the HPA fleet through the real controller, and a
// long window per server with memory over time.
type soakOptions struct {
	soak                     time.Duration
	churnPerSec, restartsSec float64
	warmupChurnPerSec        float64 // during -soak-warmup; 0: churnPerSec
	nodeChurnEvery           time.Duration
	churnSeed                uint64
	spread                   bool // pods on random nodes (kubeletsim.Config.Spread); completeSpread defaults it
	hpa, hpaSyncs            int
	hpaSyncPeriod            time.Duration
	soakPlot, soakProfiles   string
	soakProfileEvery         time.Duration // heap profiles between the warm-up's and the end's
	soakWarmup, soakTopEvery time.Duration
	soakCompared             time.Duration // the compared servers' window; 0: -soak
	soakTrack                int
}

func (o *soakOptions) flags() {
	flag.DurationVar(&o.soak, "soak", 0, "run the soak phase for this long per server (0: none): churn, the HPA fleet and `kubectl top pods -A` every -soak-top-every, with RSS and Go heap sampled every 10 s (`make bench-soak`)")
	flag.DurationVar(&o.soakCompared, "soak-metrics-server", 0, "the soak window of the servers compared with ours (metrics-server, a baseline) when shorter than metrics-ring's (0: -soak): an hour of metrics-ring for its memory slope, a shorter window of metrics-server under the same load for the ratios of rates (CPU a minute, lists a second)")
	flag.Float64Var(&o.churnPerSec, "churn-per-sec", 0, "during the soak, pods replaced a second: each deleted and a successor created under a new name on a random node, in its namespace with its labels (a few also move when a node leaves)")
	flag.Float64Var(&o.warmupChurnPerSec, "soak-warmup-churn-per-sec", 0, "pods replaced a second during -soak-warmup (0: -churn-per-sec): a faster warm-up turns the pods over before the slopes' window, so that it measures a server whose hash maps keyed by pod (the pod informer's label index's large sets) have settled, as in a cluster whose server has run for days (BENCHMARKS.md, \"What settled in the first turnovers\")")
	flag.Float64Var(&o.restartsSec, "restarts-per-sec", 1, "during the soak with churn, container restarts a second (a new start time and a counter from zero)")
	flag.DurationVar(&o.nodeChurnEvery, "node-churn-every", 5*time.Minute, "during the soak with churn, a random node leaves this often (its pods replaced on others, its Node deleted, its kubelet gone) and the one that left before comes back (0: none)")
	flag.Uint64Var(&o.churnSeed, "churn-seed", 29, "seed of the churn's random choices")
	flag.BoolVar(&o.spread, "spread", false, "place each pod on a node drawn at random (from -churn-seed) rather than -pods on every node: the spread churn settles into, so that a soak's memory does not grow with a spread still widening from every node alike; pod sim-pod-I-J is then not on node I (default: true in a soak with churn, false otherwise)")
	flag.IntVar(&o.hpa, "hpa", 0, "HPA fleet: this many Deployments of -hpa-pods pods, each with an autoscaling/v2 HPA on CPU utilization, synced by the real kube-controller-manager (HPA controller alone) during the soak")
	flag.IntVar(&o.hpaSyncs, "hpa-syncs", 0, "--concurrent-horizontal-pod-autoscaler-syncs of kube-controller-manager (0: one per 40 HPAs, 5 to 50, as a large cluster would raise the default 5)")
	flag.DurationVar(&o.hpaSyncPeriod, "hpa-sync-period", 15*time.Second, "--horizontal-pod-autoscaler-sync-period of kube-controller-manager")
	flag.StringVar(&o.soakPlot, "soak-plot", filepath.Join(os.TempDir(), "metrics-ring-soak.svg"), "where the soak's plot of RSS and Go heap over time is written (SVG); its samples go beside it (the same name, .csv)")
	flag.StringVar(&o.soakProfiles, "soak-heap-profiles", "", "folder for heap profiles of metrics-ring at the end of its warm-up and of its soak (each after a garbage collection, with a goroutine profile) and a CPU profile (60 s) from its middle (none when empty; keep it outside the repository)")
	flag.DurationVar(&o.soakProfileEvery, "soak-heap-profile-every", 0, "with -soak-heap-profiles, also a heap profile this often after the warm-up's (0: only the warm-up's end and the soak's end)")
	flag.DurationVar(&o.soakWarmup, "soak-warmup", 10*time.Minute, "memory samples of the soak's first this long are left out of the RSS and heap slopes")
	flag.DurationVar(&o.soakTopEvery, "soak-top-every", time.Minute, "how often the soak runs `kubectl top pods -A` and checks served values, and the HPAs' status, against the truth")
	flag.IntVar(&o.soakTrack, "soak-track", 40, "during the soak, at most this many new pods (until served) and as many deleted pods (until no longer served) are probed each second")
}

// completeSpread sets -spread's default when the command line did not: a soak with churn starts spread. Churn
// widens an even start into the spread at about the rate each pod is replaced (30,000 pods at 10 a second: within
// the hour), and every buffer sized by the largest node's response grows with it, which an hour's memory slope
// would count as a leak.
func (o *soakOptions) completeSpread(set map[string]bool) {
	if !set["spread"] {
		o.spread = o.soak > 0 && o.churnPerSec > 0
	}
}

// spreadNote qualifies "N nodes x P pods" in tables and plots: with -spread, P is the mean.
func (o soakOptions) spreadNote() string {
	if o.spread {
		return " (a mean: spread at random)"
	}
	return ""
}

// churn is the soak's replacement rate: -soak-warmup-churn-per-sec during the warm-up, -churn-per-sec after.
func (o soakOptions) churn() churnRate {
	r := churnRate{perSec: o.churnPerSec, warmPerSec: o.churnPerSec, warmup: o.soakWarmup}
	if o.warmupChurnPerSec > 0 {
		r.warmPerSec = o.warmupChurnPerSec
	}
	return r
}

// warmupChurnNote qualifies the churn rate in tables when the warm-up's differs.
func (o soakOptions) warmupChurnNote() string {
	if r := o.churn(); r.warmPerSec != r.perSec {
		return fmt.Sprintf(" (%.1f during the warm-up)", r.warmPerSec)
	}
	return ""
}

// soakFor is target t's soak window: -soak, or -soak-metrics-server when set for a server compared with ours.
func (o soakOptions) soakFor(t target) time.Duration {
	if o.soakCompared > 0 && !t.profiles {
		return o.soakCompared
	}
	return o.soak
}

// soakWindows says how long each server soaked, for tables and plots.
func (o soakOptions) soakWindows() string {
	if o.soakCompared > 0 && o.soakCompared != o.soak {
		return fmt.Sprintf("%s of metrics-ring, %s of each server compared", o.soak.Round(time.Second), o.soakCompared.Round(time.Second))
	}
	return fmt.Sprintf("%s per server", o.soak.Round(time.Second))
}

// hpaSyncsOrAuto is the --concurrent-horizontal-pod-autoscaler-syncs to run with.
func (o soakOptions) hpaSyncsOrAuto() int {
	if o.hpaSyncs > 0 {
		return o.hpaSyncs
	}
	return min(50, max(5, o.hpa/40))
}

func (o options) validateSoak() error {
	if o.soak == 0 && (o.churnPerSec > 0 || o.hpa > 0) {
		return fmt.Errorf("-churn-per-sec and -hpa act during the soak phase: set -soak")
	}
	if o.soak == 0 {
		return nil
	}
	if o.soak < time.Minute || o.churnPerSec < 0 || o.churnPerSec > 1000 || o.restartsSec < 0 ||
		o.restartsSec > 1000 || o.nodeChurnEvery < 0 || o.hpa < 0 || o.hpaSyncs < 0 ||
		o.hpaSyncPeriod < time.Second || o.soakTopEvery < 10*time.Second || o.soakTrack < 1 || o.soakWarmup < 0 ||
		(o.soakProfileEvery != 0 && o.soakProfileEvery < time.Minute) {
		return fmt.Errorf("need -soak >= 1m, -churn-per-sec and -restarts-per-sec in [0, 1000], -node-churn-every, -hpa, -hpa-syncs and -soak-warmup >= 0, -hpa-sync-period >= 1s, -soak-top-every >= 10s, -soak-track >= 1 and -soak-heap-profile-every 0 or >= 1m")
	}
	if o.warmupChurnPerSec < 0 || o.warmupChurnPerSec > 1000 || (o.warmupChurnPerSec > 0 && (o.churnPerSec == 0 || o.soakWarmup == 0)) {
		return fmt.Errorf("-soak-warmup-churn-per-sec %g: want it in [0, 1000], with -churn-per-sec and -soak-warmup set", o.warmupChurnPerSec)
	}
	if o.soakWarmup >= o.soak {
		return fmt.Errorf("-soak-warmup %s leaves no memory samples of a %s soak for the slope", o.soakWarmup, o.soak)
	}
	if o.soakCompared != 0 && (o.soakCompared > o.soak || o.soakWarmup >= o.soakCompared) {
		return fmt.Errorf("-soak-metrics-server %s: want at most -soak %s and more than -soak-warmup %s", o.soakCompared, o.soak, o.soakWarmup)
	}
	if o.hpa > 0 {
		if n := kubeletsim.Workloads(o.simConfig()); o.hpa > n || o.hpaPods < 1 {
			return fmt.Errorf("-hpa %d: the cluster has %d workloads of -hpa-pods %d pods (%d pods in %d namespaces)", o.hpa, n, o.hpaPods, o.nodes*o.pods, o.nsCount)
		}
	}
	if o.nodeChurnEvery > 0 && o.churnPerSec > 0 && o.nodes < 2 {
		return fmt.Errorf("-node-churn-every needs at least 2 nodes (the pods of the node that leaves move to another)")
	}
	return nil
}
