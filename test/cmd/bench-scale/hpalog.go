package main

import (
	"bufio"
	"os"
	"strings"
	"time"
)

// The HPA controller's failed syncs are read from kube-controller-manager's log, by their time: its events are
// written late (the recorder rate-limits and aggregates a burst), so the start-up's FailedGetResourceMetric events
// land as count increments inside a later window (BENCHMARKS.md, issue 29).

// failedSyncLine marks a failed HPA sync in kube-controller-manager's log, and firstError starts its cause.
const (
	failedSyncLine = "failed to compute desired number of replicas"
	firstError     = "first error is: "
)

// syncFailures are the failed HPA syncs of a window: how many, by cause, and by the HPA's scale target
// ("Deployment/namespace/name") and by minute of the window, which tell one HPA failing at every sync from many
// failing at once.
type syncFailures struct {
	n               int
	untargeted      int // of n, those whose line names no scale target: counted as no HPA
	causes, targets map[string]int
	byMinute        map[int]int // minutes since the window's start
}

// failedSyncs counts the failed HPA syncs logged in file (kube-controller-manager's klog) from from to to.
func failedSyncs(file string, from, to time.Time) (syncFailures, error) {
	r := syncFailures{causes: map[string]int{}, targets: map[string]int{}, byMinute: map[int]int{}}
	f, err := os.Open(file)
	if err != nil {
		return r, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, failedSyncLine) {
			continue
		}
		at, ok := klogTime(line, from)
		if !ok || at.Before(from) || at.After(to) {
			continue
		}
		r.n++
		r.causes[syncCause(line)]++
		if target := syncTarget(line); target != "" {
			r.targets[target]++
		} else {
			r.untargeted++
		}
		r.byMinute[int(at.Sub(from)/time.Minute)]++
	}
	return r, sc.Err()
}

// syncTarget is a failed sync's scale target, as the controller names it ("for Deployment/ns/name:"), or "" when
// the line names none.
func syncTarget(line string) string {
	const before = "based on listed metrics for "
	i := strings.Index(line, before)
	if i < 0 {
		return ""
	}
	target := line[i+len(before):]
	if j := strings.IndexByte(target, ':'); j >= 0 {
		target = target[:j]
	}
	return target
}

// klogTime is the time of a klog line ("E1127 17:46:08.327203 ..."), in near's year and location.
func klogTime(line string, near time.Time) (time.Time, bool) {
	if len(line) < 21 {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], near.Location())
	if err != nil {
		return time.Time{}, false
	}
	return t.AddDate(near.Year(), 0, 0), true
}

// syncCause is a failed sync's first error, without the quoting and fields klog adds after it.
func syncCause(line string) string {
	i := strings.Index(line, firstError)
	if i < 0 {
		return "(no cause logged)"
	}
	cause := line[i+len(firstError):]
	if j := strings.Index(cause, `" logger=`); j >= 0 {
		cause = cause[:j]
	}
	return cause
}
