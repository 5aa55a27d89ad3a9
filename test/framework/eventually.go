package framework

import (
	"context"
	"testing"
	"time"
)

// EventuallyInterval is how often Eventually checks: half the 2 s --metric-resolution the e2e packages run
// metrics-ring at, so that no collection cycle goes unseen and a loaded machine is not polled harder than it
// collects.
const EventuallyInterval = time.Second

// Eventually polls cond every EventuallyInterval for at most timeout and fails the test with cond's last
// complaint if it never holds. The e2e tests wait for what metrics-ring serves after its next cycles, never a
// fixed sleep, so they are as quick as the machine allows and fail with the reason, not a timeout alone.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	EventuallyEvery(t, what, EventuallyInterval, timeout, cond)
}

// EventuallyEvery is Eventually with its own polling interval, for what must be caught within a cycle. How
// long it waited is logged (-v), to tell where a slow run spends its time.
func EventuallyEvery(t testing.TB, what string, interval, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	start := time.Now()
	defer func() {
		t.Helper()
		t.Logf("waited %s for %s", time.Since(start).Round(time.Millisecond), what)
	}()
	err := Poll(context.Background(), what, interval, timeout, func(ctx context.Context) (bool, error) {
		if err := cond(ctx); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
