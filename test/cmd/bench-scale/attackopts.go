package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
)

// attackOptions are the attack phase's flags (issue 26 finding 1).
type attackOptions struct {
	attack                             bool
	attackUsers                        []int
	attackDuration, hpaInterval        time.Duration
	attackSelectors, attackMaxRequests int
	hpaClients, hpaPods                int
	pageThrough                        bool // issue 26 finding 3
	pageChunk                          int
	pageTimeout                        time.Duration
	freshStats, msInsecureTLS          bool // issue 29 item 5
	attackNice                         bool // the attackers in a process of their own at nice 19
	attackShard                        bool // internal: this process is that one
}

func (o *attackOptions) flags() {
	flag.BoolVar(&o.attack, "attack", false, "run the attack phase (issue 26 finding 1): -hpa-clients HPA-like clients list their own workloads while, in turn for each of -attack-users, that many users (each its own identity with view) list every pod through distinct all-matching selectors for -attack-duration")
	o.attackUsers = []int{1, 100}
	flag.Func("attack-users", "comma-separated numbers of attacking users, one attack phase each (default 1,100)", func(v string) error {
		o.attackUsers = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("%q is not a number of users (1 or more)", f)
			}
			o.attackUsers = append(o.attackUsers, n)
		}
		return nil
	})
	flag.DurationVar(&o.attackDuration, "attack-duration", 60*time.Second, "how long the users attack in each attack phase")
	flag.IntVar(&o.attackSelectors, "attack-selectors", 10000, "distinct all-matching selectors each attacking user cycles through")
	flag.BoolVar(&o.attackNice, "attack-nice", true, "run the attacking users' clients in a process of their own at nice 19, as clients elsewhere would not take the server's cores (direct only; false: in this process, beside the HPA-like clients)")
	flag.BoolVar(&o.attackShard, "attack-shard", false, "internal: attack as told on standard input and write the tallies (how -attack-nice runs its attackers)")
	flag.IntVar(&o.attackMaxRequests, "attack-max-requests", 1000000, "upper bound on the attackers' requests in one phase")
	flag.IntVar(&o.hpaClients, "hpa-clients", 2000, "HPA-like clients in the attack phase, each listing its own workload's pods by label selector (v1 and v1beta1 alternately)")
	flag.IntVar(&o.hpaPods, "hpa-pods", 15, "pods of each HPA-like client's workload (with -attack the simulator labels pods so such selections exist)")
	flag.BoolVar(&o.pageThrough, "page-through", false, "run `kubectl get podmetrics -A` (pages of -page-chunk) and count the pages and the builds they caused (issue 26 finding 3)")
	flag.IntVar(&o.pageChunk, "page-chunk", 500, "--chunk-size of the page-through (kubectl's default is 500)")
	flag.DurationVar(&o.pageTimeout, "page-timeout", 15*time.Minute, "upper bound on the page-through")
	flag.BoolVar(&o.freshStats, "fresh-stats", true, "simulated kubelets stamp every container's lines with a time of their own and a working set that moves, new at every scrape, as a real kubelet does (false: one time for every line and constant working sets, as before issue 29 item 5)")
	flag.BoolVar(&o.msInsecureTLS, "metrics-server-insecure-tls", true, "run metrics-server with --kubelet-insecure-tls, as its usual installs do (false: with the kubelets' CA, as metrics-ring)")
	flag.DurationVar(&o.hpaInterval, "hpa-interval", 15*time.Second, "how often each HPA-like client lists (the HPA controller's sync period)")
}

func (o options) validateAttack() error {
	if o.pageThrough && (o.pageChunk < 1 || o.pageTimeout < time.Second) {
		return fmt.Errorf("need -page-chunk >= 1 and -page-timeout >= 1s")
	}
	if !o.attack {
		return nil
	}
	if len(o.attackUsers) == 0 || o.attackDuration < time.Second || o.attackSelectors < 1 || o.attackMaxRequests < 1 ||
		o.hpaClients < 1 || o.hpaPods < 1 || o.hpaInterval < time.Second {
		return fmt.Errorf("need -attack-users, -attack-duration and -hpa-interval >= 1s, and -attack-selectors, -attack-max-requests, -hpa-clients and -hpa-pods >= 1")
	}
	if n := kubeletsim.Workloads(o.simConfig()); o.hpaClients > n {
		return fmt.Errorf("-hpa-clients %d: the cluster has %d workloads of %d pods (%d pods in %d namespaces)", o.hpaClients, n, o.hpaPods, o.nodes*o.pods, o.nsCount)
	}
	return nil
}

// printAttack prints, for each target that ran it, one column per attack phase.
func (r *result) printAttack(t table) {
	o := r.opts
	for _, tr := range t.targets {
		if len(tr.attacks) == 0 {
			continue
		}
		fmt.Fprintln(t.tw)
		where := "in this process"
		if o.attackNice && o.loadVia != "aggregator" {
			where = "in a process of their own at nice 19"
		}
		fmt.Fprintf(t.tw, "%s, attack: %d HPA-like clients (one identity, HTTP/2), each listing its %d pods every %s (v1 and v1beta1); users (own identity, view, own connection, %s) each listing all %d pods through %d distinct selectors for %s; via %s\n",
			tr.name, o.hpaClients, o.hpaPods, o.hpaInterval, where, o.nodes*o.pods, o.attackSelectors, o.attackDuration, o.loadVia)
		cols := []string{"attack measure"}
		for _, a := range tr.attacks {
			cols = append(cols, fmt.Sprintf("%d user(s)", a.users))
		}
		fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
		row := func(label string, f func(a *attackResult) string) {
			cs := []string{label}
			for _, a := range tr.attacks {
				cs = append(cs, f(a))
			}
			fmt.Fprintln(t.tw, strings.Join(cs, "\t"))
		}
		rss := func(v uint64) string { return mib(float64(v)) }
		row("RSS idle (before the phase)", func(a *attackResult) string { return rss(a.rssIdle) })
		row("RSS max, HPA clients alone", func(a *attackResult) string { return rss(a.rssHPA) })
		row("RSS max, during the attack (0.5 s samples)", func(a *attackResult) string { return rss(a.rssPeak) })
		row("  to idle", func(a *attackResult) string { return ratio(float64(a.rssPeak) / float64(a.rssIdle)) })
		row("peak RSS (VmHWM) during the phase", func(a *attackResult) string { return rss(a.hwm) })
		row("HPA lists alone: answered / ok", func(a *attackResult) string { return fmt.Sprintf("%d / %d", a.alone.requests, a.alone.ok) })
		row("HPA latency alone p50 / p99", func(a *attackResult) string { return durs(a.alone.quantile(0.5), a.alone.quantile(0.99)) })
		row("HPA lists during: answered / ok", func(a *attackResult) string { return fmt.Sprintf("%d / %d", a.during.requests, a.during.ok) })
		row("HPA latency during p50 / p99 / max", func(a *attackResult) string {
			return durs(a.during.quantile(0.5), a.during.quantile(0.99), a.during.quantile(1))
		})
		row("  server's view (whole phase) p50 / p99", func(a *attackResult) string {
			return seconds(a.serverHPA50) + " / " + seconds(a.serverHPA99)
		})
		row("HPA 429s / errors / wrong counts", func(a *attackResult) string {
			return fmt.Sprintf("%d / %d / %d", a.alone.tooMany+a.during.tooMany, a.alone.errors+a.during.errors, a.alone.wrongCount+a.during.wrongCount)
		})
		row("attackers' lists: complete / 429 / errors / short", func(a *attackResult) string {
			return fmt.Sprintf("%d / %d / %d / %d", a.attack.complete, a.attack.tooMany, a.attack.errors, a.attack.short)
		})
		row("attackers' list latency, server's view p50", func(a *attackResult) string { return seconds(a.serverAttack50) })
		row("attackers' complete lists a second", func(a *attackResult) string {
			return fmt.Sprintf("%.1f", float64(a.attack.complete)/a.attackElapsed.Seconds())
		})
		row("builds made / evicted / rejected (429)", func(a *attackResult) string {
			return fmt.Sprintf("%.0f / %.0f / %.0f", a.builds, a.evicted, a.rejected)
		})
		row("builds kept bytes, max / at the end", func(a *attackResult) string {
			return mib(a.keptMax) + " / " + mib(a.keptEnd)
		})
		row("collection kept its interval", func(a *attackResult) string {
			return yesNo(keptInterval(a.coll, a.expectedCycles, o.resolution))
		})
		row("CPU during the phase", func(a *attackResult) string { return cpu(a.coll.cpuPerMin) })
		row("load average at start / end", func(a *attackResult) string { return a.coll.loadBefore + " / " + a.coll.loadAfter })
		for _, a := range tr.attacks {
			kinds := map[string]int{}
			for k, n := range a.alone.kinds {
				kinds["HPA: "+k] += n
			}
			for k, n := range a.during.kinds {
				kinds["HPA: "+k] += n
			}
			for k, n := range a.attack.kinds {
				kinds["attacker: "+k] += n
			}
			if len(kinds) > 0 {
				t.footnote(fmt.Sprintf("%d user(s)", a.users), a.coll, kinds)
			}
		}
	}
}

func durs(ds ...time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return strings.Join(s, " / ")
}
