package api

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-base/metrics/testutil"
)

// TestOneUsersAnswerWaitersCapped (a review's finding): requests waiting for room in --answer-bytes had no cap per
// user, only the generic server's in-flight limit, so one user could park every request the server accepts there.
// With the budget full, one user's 40 large answers at once have 32 waiting (as the build slots' waiters: max(8 x
// slots, 32)) and 8 answered 429 at once, naming the flag; another user's answer still waits, and gets its room
// once some is given back.
func TestOneUsersAnswerWaitersCapped(t *testing.T) {
	const budget = 1 << 20
	registerMetrics()
	a := newAnswerBudget(budget)
	a.after = func(time.Duration) <-chan time.Time { return nil } // no time limit: only the cap answers at once
	hogCtx, hog := held("hog")
	if err := a.take(hogCtx, budget, true); err != nil {
		t.Fatal(err)
	}
	waitingBefore := waitingForAnswers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // bounds a broken budget's waits
	defer cancel()
	results := make(chan listResult, 64)
	wait := func(name string) {
		rctx, hold := withAnswerHold(asUser(name))
		rctx, stop := context.WithCancel(rctx)
		context.AfterFunc(ctx, stop)
		go func() {
			defer hold.release()
			results <- listResult{name, a.reserve(rctx, budget/8)}
		}()
	}
	for range 40 {
		wait("alice")
	}
	for _, r := range answered(t, results, 8) {
		if !apierrors.IsTooManyRequests(r.err) || !strings.Contains(r.err.Error(), "--answer-bytes") {
			t.Errorf("%s's answer beyond 32 waiting: %v, want 429 naming --answer-bytes", r.user, r.err)
		}
	}
	waitFor(t, "alice's 32 answers waiting", func() bool { return waitingForAnswers(t)-waitingBefore == 32 })
	wait("bob")
	waitFor(t, "bob's answer waiting", func() bool { return waitingForAnswers(t)-waitingBefore == 33 })
	hog.release()
	var bob error = context.DeadlineExceeded
	for bob != nil { // alice's quarter of the budget and bob's room are given; the rest of alice's wait on
		r := answered(t, results, 1)[0]
		if r.user == "bob" {
			bob = r.err
			if bob != nil {
				t.Fatalf("bob's answer once room was given back: %v", bob)
			}
		} else if r.err != nil {
			t.Errorf("alice's waiting answer once room was given back: %v", r.err)
		}
	}
	cancel()
}

// waitingForAnswers is metrics_ring_api_answers_waiting.
func waitingForAnswers(t *testing.T) float64 {
	t.Helper()
	n, err := testutil.GetGaugeMetricValue(answersWaiting)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
