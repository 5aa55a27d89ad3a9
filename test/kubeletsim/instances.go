package kubeletsim

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Faults of instances: a kubelet reporting a container's or a pod's older instance besides, or instead of, the
// current one, and a container's start time past what int64 nanoseconds hold. Truth is always the current
// instance's: a correct pipeline serves it, or nothing, never a mix (DESIGN.md section 2, restarts and "Whose
// samples count").

// instanceFault makes a node report a container's older instance at every every-th scrape, in place of the
// current one.
type instanceFault struct {
	pod     *pod
	old     *container
	every   uint64
	scrapes atomic.Uint64
}

// container returns the instance of c to report at this scrape (oldTurn: the old instance's turn).
func (f *instanceFault) container(p *pod, c *container, oldTurn bool) *container {
	if oldTurn && p == f.pod && c.name == f.old.name {
		return f.old
	}
	return c
}

// AlternateInstances restarts a container (a new instance, started now, at the old one's rate and working set)
// and has its node report the old instance, going on as before, at every every-th scrape in place of the new
// one: two start times and counters of one container alternating, as a kubelet reporting two instances of one
// pod name does. Truth is the new instance's, which uses as much as the old one. every 0 stops the old instance's
// reports. The node's own counter is unchanged. Only the kubelet's collector renders it (not Config.FastResource).
func (s *Sim) AlternateInstances(namespace, pod, container string, every int) error {
	p, err := s.lookup(namespace, pod)
	if err != nil {
		return err
	}
	n := p.node
	if every <= 0 {
		n.instances.Store(nil)
		return nil
	}
	now := timeNow()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range p.containers {
		if c.name == container {
			old := *c
			c.start = now
			c.cpu = counter{base: 1, since: now.UnixNano(), rate: c.cpu.rate} // 1 ns: a counter of 0 is broken
			n.instances.Store(&instanceFault{pod: p, old: &old, every: uint64(every)})
			return nil
		}
	}
	return fmt.Errorf("kubeletsim: pod %s/%s has no container %q", namespace, pod, container)
}

// DetachPod forgets a pod as the sim's (Truth leaves it out; AddPod may add another under its name) while its
// node goes on reporting it, before any pod of the name added later, as a kubelet reports a force-deleted pod
// whose containers still run: a pipeline that reads the name alone takes its samples (the first of duplicate
// series) for its successor's. The returned function stops the reports.
func (s *Sim) DetachPod(namespace, name string) (stop func(), err error) {
	s.mu.Lock()
	p, ok := s.dropLocked(key(namespace, name))
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("kubeletsim: unknown pod %s/%s", namespace, name)
	}
	n := p.node
	n.mu.Lock()
	p.detached = true
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for i, q := range n.pods {
			if q == p {
				var sum uint64
				for _, c := range p.containers {
					sum += c.cpu.rate
				}
				n.cpu.set(timeNow().UnixNano(), n.cpu.rate-sum)
				n.pods = append(n.pods[:i], n.pods[i+1:]...)
				n.sortedValid = false
				return
			}
		}
	}, nil
}

// farStart makes a node report a container's start time 2^64 ns (584 years) after a second before each sample:
// in the year 2611, past int64 nanoseconds, whose time.Time.UnixNano wraps to just before the sample.
type farStart struct{ namespace, pod, container string }

// FarFutureStart has a container's container_start_time_seconds reported in the year 2611 (about 2.02e10 s), a
// new value at each scrape, or as before when on is false. Its CPU and memory, and so Truth, are unchanged. Only
// the kubelet's collector renders it (not Config.FastResource).
func (s *Sim) FarFutureStart(namespace, pod, container string, on bool) error {
	p, err := s.lookup(namespace, pod)
	if err != nil {
		return err
	}
	if !on {
		p.node.farStart.Store(nil)
		return nil
	}
	p.node.farStart.Store(&farStart{namespace, pod, container})
	return nil
}

// rewrite serves h's response with the container's start time line replaced.
func (f *farStart) rewrite(h http.Handler, w http.ResponseWriter, r *http.Request) {
	r = r.Clone(r.Context())
	r.Header.Del("Accept-Encoding") // the body is edited below: plain text
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	prefix := fmt.Appendf(nil, "container_start_time_seconds{container=%q,namespace=%q,pod=%q} ", f.container,
		f.namespace, f.pod)
	body := rec.body.Bytes()
	if i := bytes.Index(body, prefix); i >= 0 {
		end := i + len(prefix) + bytes.IndexByte(body[i+len(prefix):], '\n')
		wrapped := float64(timeNow().Add(-time.Second).UnixNano())/1e9 + math.Exp2(64)/1e9
		value := i + len(prefix)
		body = append(append(append([]byte{}, body[:value]...), strconv.FormatFloat(wrapped, 'g', -1, 64)...),
			body[end:]...)
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(cmpStatus(rec.status))
	_, _ = w.Write(body)
}

func cmpStatus(s int) int {
	if s == 0 {
		return http.StatusOK
	}
	return s
}

// recorder keeps a response in memory.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
