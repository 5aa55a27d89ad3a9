package api

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/metrics-ring/metrics-ring/pkg/storage"
)

// indexedPodStorage serves 600 pods in ns-a (app=app-0 ... app-39, 15 each) and 10 in ns-b through the label
// index, with one build slot and no wait for it.
func indexedPodStorage(t *testing.T) *podREST {
	t.Helper()
	inf, ix := newIndexedPods(t, 600, func(i int) map[string]string {
		return map[string]string{"app": fmt.Sprintf("app-%d", i%40)}
	})
	m := &fakeMetrics{pods: map[string]storage.PodPoint{}}
	for i := 0; i < 600; i++ {
		m.pods[fmt.Sprintf("ns-a/p%04d", i)] = podPoint(storage.ContainerPoint{Name: "app", Usage: storageUsage(1, 1)})
	}
	for i := 0; i < 10; i++ {
		inf.add(podMeta("ns-b", fmt.Sprintf("p%d", i), nil))
		m.pods[fmt.Sprintf("ns-b/p%d", i)] = podPoint(storage.ContainerPoint{Name: "app", Usage: storageUsage(1, 1)})
	}
	s := newPodStorage(m, ix, newReaders(Deps{}))
	s.limit = newBuildLimit(1)
	expired := make(chan time.Time)
	close(expired)
	s.limit.after = func(time.Duration) <-chan time.Time { return expired }
	return s
}

// TestSmallSelectionsNeedNoSlot: with every build slot held by big builds, a selection of a few pods (an HPA's)
// is answered, in its namespace or in all, and so is a small namespace; large selections still wait for a slot (here: 429 at once).
func TestSmallSelectionsNeedNoSlot(t *testing.T) {
	s := indexedPodStorage(t)
	release, err := s.limit.acquire(asUser("attacker"))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	tests := []struct {
		namespace, selector string
		want                int // -1: 429
	}{
		{"ns-a", "app=app-1", 15},
		{"ns-a", "app in (app-1,app-2)", 30},
		{"ns-b", "", 10},
		{"ns-a", "", -1},
		{"ns-a", "app!=app-1", -1},             // walks the namespace
		{metav1.NamespaceAll, "app=app-1", 15}, // every namespace's set
		{metav1.NamespaceAll, "", -1},          // walks every pod
	}
	for _, tt := range tests {
		ctx := genericapirequest.WithNamespace(asUser("hpa"), tt.namespace)
		obj, err := s.List(ctx, listOpts(t, tt.selector, ""))
		switch {
		case tt.want < 0 && !apierrors.IsTooManyRequests(err):
			t.Errorf("%q in %q while every slot is busy: %v, want 429", tt.selector, tt.namespace, err)
		case tt.want >= 0 && err != nil:
			t.Errorf("%q in %q while every slot is busy: %v, want %d pods", tt.selector, tt.namespace, err, tt.want)
		case tt.want >= 0 && len(podList(t, obj).Items) != tt.want:
			t.Errorf("%q in %q: %d pods, want %d", tt.selector, tt.namespace, len(podList(t, obj).Items), tt.want)
		}
	}
}

type listResult struct {
	user string
	err  error
}

// blockedLists is a pod storage of 3 pods whose builds each wait for a value on block, with one build slot and
// no time limit on waiting for it; list starts a list of user, its result sent to results.
func blockedLists(t *testing.T) (s *podREST, k *hookedKind[storage.PodPoint], list func(user, sel string), results chan listResult) {
	_, k, s, _ = hookedPods(t, 3)
	k.block = make(chan struct{})
	s.limit = newBuildLimit(1)
	s.limit.after = func(time.Duration) <-chan time.Time { return nil }
	var tick atomic.Int64
	s.limit.now = func() time.Time { return time.Unix(0, tick.Add(int64(time.Millisecond))) }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // bounds a broken limiter's waits
	t.Cleanup(cancel)
	results = make(chan listResult, 256)
	list = func(name, sel string) {
		opts := listOpts(t, sel, "")
		rctx := genericapirequest.WithUser(genericapirequest.WithNamespace(ctx, "ns-a"), &user.DefaultInfo{Name: name})
		go func() {
			_, err := s.List(rctx, opts)
			results <- listResult{name, err}
		}()
	}
	return s, k, list, results
}

// answered receives n results, failing the test when they do not come within a generous bound.
func answered(t *testing.T, results chan listResult, n int) []listResult {
	t.Helper()
	var out []listResult
	for len(out) < n {
		select {
		case r := <-results:
			out = append(out, r)
		case <-time.After(20 * time.Second):
			t.Fatalf("%d lists answered, want %d", len(out), n)
		}
	}
	return out
}

// waitFor polls cond, failing the test when it does not hold within a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("waiting for %s", what)
		}
	}
}

func (l *buildLimit) waitingNow() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.queued
	for _, u := range l.users {
		n += u.blocked
	}
	return n
}

// TestOneUsersFloodDoesNotStarveAnother: one user listing 40 distinct all-matching selections at once with one
// build slot has 32 waiting (8 x slots, at least 32) and the rest answered 429 at once; another user's list that
// came after all of them is built next, after the one build running when it came.
func TestOneUsersFloodDoesNotStarveAnother(t *testing.T) {
	s, k, list, results := blockedLists(t)
	list("alice", "x!=a0")
	waitFor(t, "alice's first build", func() bool { return k.builds.Load() == 1 })
	for i := 1; i <= 40; i++ {
		list("alice", fmt.Sprintf("x!=a%d", i))
	}
	for _, r := range answered(t, results, 8) {
		if !apierrors.IsTooManyRequests(r.err) {
			t.Errorf("%s's list beyond 32 waiting: %v, want 429", r.user, r.err)
		}
	}
	waitFor(t, "alice's 32 lists waiting", func() bool { return s.limit.waitingNow() == 32 })
	list("bob", "x!=b")
	waitFor(t, "bob's list waiting", func() bool { return s.limit.waitingNow() == 33 })
	var before int
	for done := false; !done; {
		k.block <- struct{}{} // the running build ends
		r := answered(t, results, 1)[0]
		if r.err != nil {
			t.Fatalf("%s's list: %v", r.user, r.err)
		}
		if done = r.user == "bob"; !done {
			before++
		}
	}
	if before != 1 {
		t.Errorf("bob's list was built after %d of alice's, want 1 (the one running when it came)", before)
	}
	close(k.block)
	answered(t, results, 31)
}

// TestOneSelectionsWaitersCapped: 200 lists of one user of one selection while its build is being made: 32 wait
// for it (8 x slots, at least 32), the others are answered 429 at once rather than each holding a request the
// server accepts; another user's list of the selection still waits and is answered.
func TestOneSelectionsWaitersCapped(t *testing.T) {
	s, k, list, results := blockedLists(t)
	list("alice", "x!=a")
	waitFor(t, "alice's build", func() bool { return k.builds.Load() == 1 })
	for i := 1; i < 200; i++ {
		list("alice", "x!=a")
	}
	for _, r := range answered(t, results, 167) {
		if !apierrors.IsTooManyRequests(r.err) {
			t.Errorf("%s's list beyond 32 waiting: %v, want 429", r.user, r.err)
		}
	}
	waitFor(t, "alice's 32 lists waiting", func() bool { return s.limit.waitingNow() == 32 })
	list("bob", "x!=a")
	waitFor(t, "bob's list waiting", func() bool { return s.limit.waitingNow() == 33 })
	close(k.block)
	for _, r := range answered(t, results, 34) {
		if r.err != nil {
			t.Errorf("%s's list of the selection being built: %v", r.user, r.err)
		}
	}
	if n := k.builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
}

// busy is how many slots builds hold.
func (l *buildLimit) busy() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running
}
