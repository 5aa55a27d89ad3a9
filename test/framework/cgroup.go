package framework

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A real node's own truth: the CPU its cgroups count (cpuacct.usage), read as the kubelet's samples are taken,
// for comparing what metrics.k8s.io serves with (e2e/realnode, e2e/realinstall).

// CPUAcctMount is where the cgroup v1 hierarchy holding the cpuacct controller is mounted (alone or with cpu).
func CPUAcctMount() (string, error) { return controllerMount("cpuacct") }

// controllerMount is where the cgroup v1 hierarchy holding controller is mounted.
func controllerMount(controller string) (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, x := range fields {
			if x == "-" && i+3 < len(fields) && fields[i+1] == "cgroup" {
				for _, opt := range strings.Split(fields[i+3], ",") {
					if opt == controller {
						return fields[4], nil
					}
				}
			}
		}
	}
	return "", fmt.Errorf("no cgroup v1 hierarchy with %s is mounted", controller)
}

// cpuSample is a cgroup's cpuacct.usage (nanoseconds of CPU) read at a time.
type cpuSample struct {
	at    time.Time
	usage uint64
}

// CgroupSampler reads a cgroup's cpuacct.usage every 50 ms, so that its usage at any instant in between can be
// interpolated: the kubelet's samples are taken at cAdvisor's times, not ours.
type CgroupSampler struct {
	file string
	mu   sync.Mutex
	s    []cpuSample
	stop chan struct{}
	done chan struct{}
}

// SampleCgroup starts reading the cgroup v1 cpuacct folder dir's usage every 50 ms.
func SampleCgroup(dir string) *CgroupSampler {
	c := &CgroupSampler{file: filepath.Join(dir, "cpuacct.usage"), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			before := time.Now()
			data, err := os.ReadFile(c.file)
			after := time.Now()
			if err == nil {
				if v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64); err == nil {
					c.mu.Lock()
					c.s = append(c.s, cpuSample{at: before.Add(after.Sub(before) / 2), usage: v})
					c.mu.Unlock()
				}
			}
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
		}
	}()
	return c
}

// Stop ends the sampling.
func (c *CgroupSampler) Stop() {
	close(c.stop)
	<-c.done
}

// at interpolates the usage at t between the two samples around it.
func (c *CgroupSampler) at(t time.Time) (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 1; i < len(c.s); i++ {
		a, b := c.s[i-1], c.s[i]
		if !t.Before(a.at) && !t.After(b.at) {
			frac := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
			return float64(a.usage) + frac*float64(b.usage-a.usage), nil
		}
	}
	if len(c.s) == 0 {
		return 0, fmt.Errorf("no sample of %s", c.file)
	}
	return 0, fmt.Errorf("%s sampled from %s to %s, not at %s", c.file,
		c.s[0].at.Format(time.StampMilli), c.s[len(c.s)-1].at.Format(time.StampMilli), t.Format(time.StampMilli))
}

// rate is the cgroup's CPU rate in cores over [from, to].
func (c *CgroupSampler) rate(from, to time.Time) (float64, error) {
	a, err := c.at(from)
	if err != nil {
		return 0, err
	}
	b, err := c.at(to)
	if err != nil {
		return 0, err
	}
	return (b - a) / float64(to.Sub(from)), nil
}

// TimestampPrecision is how much of a served sample time the API drops: metav1.Time carries whole seconds, in
// JSON and in protobuf alike, so a sample served at ts was taken in [ts, ts+1s).
const TimestampPrecision = time.Second

// RateRange is the lowest and highest rate of the cgroup over a window of the given length ending anywhere the
// served timestamp ts allows (see TimestampPrecision). A burn sharing busy cores changes its rate by several %
// from one second to the next: a window placed a second off was once 8 % off a value that was right.
func (c *CgroupSampler) RateRange(ts time.Time, window time.Duration) (lo, hi float64, err error) {
	for end := ts; end.Before(ts.Add(TimestampPrecision)); end = end.Add(50 * time.Millisecond) {
		r, err := c.rate(end.Add(-window), end)
		if err != nil {
			return 0, 0, err
		}
		if end.Equal(ts) || r < lo {
			lo = r
		}
		if end.Equal(ts) || r > hi {
			hi = r
		}
	}
	return lo, hi, nil
}

// OffRange is how far got is from [lo, hi], relative to the nearer end: 0 inside.
func OffRange(got, lo, hi float64) float64 {
	switch {
	case got < lo:
		return (got - lo) / lo
	case got > hi:
		return (got - hi) / hi
	}
	return 0
}

// FindDir finds a folder named name below root.
func FindDir(root, name string) (string, error) {
	found := ""
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == name {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	if found == "" {
		return "", fmt.Errorf("no folder %s under %s", name, root)
	}
	return found, nil
}
