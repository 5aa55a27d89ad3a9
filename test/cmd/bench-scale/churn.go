package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/metrics-ring/metrics-ring/test/kubeletsim"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
)

// churner makes the soak's churn (issue 29 item 1): pods replaced and containers restarted at set rates, a node
// leaving and the one before coming back at a set period, in the simulator (every process serving it: forward)
// and in the API server, as kubelets and controllers would. The tracker hears of every pod deleted and every
// new pod Running.
type churner struct {
	sim     *kubeletsim.Sim
	pl      *kubeletsim.Planner
	c       kubernetes.Interface
	forward func(kubeletsim.Step) error // to the other processes serving the cluster (nil: none)
	tr      *tracker

	mu    sync.Mutex
	tally churnTally
}

// churnTally counts what the churn did and what failed, by kind.
type churnTally struct {
	replaced, restarted, nodesDown, nodesUp int
	errors                                  map[string]int
}

// newChurner churns through pl, which plans every soak of a run: a Planner names its pods in sequence, and a
// second from the same seed would name the next server's new pods as the first's.
func newChurner(sim *kubeletsim.Sim, pl *kubeletsim.Planner, c kubernetes.Interface, forward func(kubeletsim.Step) error) *churner {
	return &churner{sim: sim, pl: pl, c: c, forward: forward, tally: churnTally{errors: map[string]int{}}}
}

// churnRate is how many pods a second the churn replaces: warmPerSec for the first warmup, perSec after.
type churnRate struct {
	perSec, warmPerSec float64
	warmup             time.Duration
}

// by is how many pods the churn has replaced elapsed after it started.
func (r churnRate) by(elapsed time.Duration) float64 {
	return r.warmPerSec*min(elapsed, r.warmup).Seconds() + r.perSec*max(0, elapsed-r.warmup).Seconds()
}

// churnWorkers bounds the changes in flight: each is a few API calls of a few milliseconds.
const churnWorkers = 16

// run churns until until: rate's replacements and restartsPerSec restarts a second, spread over each second, and
// every nodeEvery a node leaving (and the one that left before coming back).
func (ch *churner) run(ctx context.Context, until time.Time, rate churnRate, restartsPerSec float64, nodeEvery time.Duration) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(churnWorkers)
	start := time.Now()
	var replaced, restarted, nodeTurns int
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for now := start; now.Before(until) && gctx.Err() == nil; now = <-tick.C {
		elapsed := now.Sub(start).Seconds()
		for ; float64(replaced) < rate.by(now.Sub(start)); replaced++ {
			g.Go(func() error { ch.replace(gctx); return nil })
		}
		for ; float64(restarted) < restartsPerSec*elapsed; restarted++ {
			g.Go(func() error { ch.restart(gctx); return nil })
		}
		if nodeEvery > 0 && now.Sub(start) >= time.Duration(nodeTurns+1)*nodeEvery {
			nodeTurns++
			g.Go(func() error { ch.nodeTurn(gctx); return nil })
		}
	}
	_ = g.Wait()
}

func (ch *churner) fail(what string, err error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.tally.errors[fmt.Sprintf("%s: %s", what, errKind(err))]++
}

func (ch *churner) count(f func(t *churnTally)) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	f(&ch.tally)
}

// apply applies an add or restart Step to this process's sim and hands it on.
func (ch *churner) apply(st kubeletsim.Step) error {
	if err := ch.sim.Apply(st); err != nil {
		return err
	}
	return ch.pass(st)
}

// pass hands a Step this process already applied (the Planner's removals) to the other processes.
func (ch *churner) pass(st kubeletsim.Step) error {
	if ch.forward == nil {
		return nil
	}
	return ch.forward(st)
}

// replace deletes a random pod and creates its successor.
func (ch *churner) replace(ctx context.Context) {
	remove, add, err := ch.pl.Replace(time.Now())
	if err != nil {
		ch.fail("replace", err)
		return
	}
	if err := ch.pass(remove); err != nil {
		ch.fail("replace", err)
		return
	}
	ch.deletePod(ctx, remove.Namespace, remove.Pod, remove.Labels)
	ch.addPod(ctx, add)
	ch.count(func(t *churnTally) { t.replaced++ })
}

func (ch *churner) deletePod(ctx context.Context, namespace, name string, labels map[string]string) {
	if err := kubeletsim.DeletePodObject(ctx, ch.c, namespace, name); err != nil {
		ch.fail("delete pod", err)
		return
	}
	if ch.tr != nil {
		ch.tr.deleted(namespace+"/"+name, labels, time.Now())
	}
}

func (ch *churner) addPod(ctx context.Context, add kubeletsim.Step) {
	add.At = time.Now() // its containers start as its object is created
	if err := ch.sim.AddPodObject(ctx, ch.c, add, ch.apply); err != nil {
		ch.fail("create pod", err)
		return
	}
	if ch.tr != nil {
		ch.tr.created(add.Namespace+"/"+add.Pod, add.Labels, time.Now())
	}
}

// restart restarts a random container.
func (ch *churner) restart(ctx context.Context) {
	st, err := ch.pl.Restart(time.Now())
	if err == nil {
		err = ch.apply(st)
	}
	if err == nil {
		err = ch.sim.RestartPodObject(ctx, ch.c, st)
	}
	if err != nil {
		ch.fail("restart", err)
		return
	}
	ch.count(func(t *churnTally) { t.restarted++ })
}

// nodeTurn brings back the node that left before, if any, and takes another out, moving its pods.
func (ch *churner) nodeTurn(ctx context.Context) {
	ch.restoreNodes(ctx)
	down, gone, adds, err := ch.pl.NodeDown(time.Now())
	if err != nil {
		ch.fail("node down", err)
		return
	}
	if err := ch.pass(down); err != nil {
		ch.fail("node down", err)
		return
	}
	if err := ch.sim.NodeObject(ctx, ch.c, down); err != nil {
		ch.fail("node down", err)
	}
	for _, p := range gone {
		ch.deletePod(ctx, p.Namespace, p.Name, p.Labels)
	}
	for _, add := range adds {
		ch.addPod(ctx, add)
	}
	ch.count(func(t *churnTally) { t.nodesDown++ })
}

// restoreNodes brings back every node that left, so the next server starts on the whole cluster.
func (ch *churner) restoreNodes(ctx context.Context) {
	for range len(ch.sim.Nodes()) {
		up, err := ch.pl.NodeUp(time.Now())
		if err != nil {
			return // none left down
		}
		if err := ch.pass(up); err != nil {
			ch.fail("node up", err)
			return
		}
		if err := ch.sim.NodeObject(ctx, ch.c, up); err != nil {
			ch.fail("node up", err)
		}
		ch.count(func(t *churnTally) { t.nodesUp++ })
	}
}

func (ch *churner) result() churnTally {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t := ch.tally
	t.errors = maps.Clone(t.errors)
	return t
}
