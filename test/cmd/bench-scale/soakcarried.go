package main

import "fmt"

// carried is the load a sample was taken under; NaN where not served.
type carried struct {
	load1     float64 // the machine's one-minute load average (/proc/loadavg)
	reads     float64 // read requests being served (apiserver_current_inflight_requests{request_kind="readOnly"})
	answers   float64 // bytes of large answers in flight (metrics_ring_api_answers_in_flight_bytes)
	keptBuild float64 // bytes readers' builds keep between requests (metrics_ring_api_builds_kept_bytes)
	// CPU since the previous sample, in cores: the server's, and every other process of the run's (the control
	// plane, the simulators, this benchmark's clients), so that a load average rising over the window reads as the
	// server's own work or the rest of the machine's.
	serverCores, othersCores float64
}

// carriedMetrics names the server's metrics behind carried's fields.
func carriedMetrics(c *carried) map[string]*float64 {
	return map[string]*float64{`apiserver_current_inflight_requests{request_kind="readOnly"}`: &c.reads,
		"metrics_ring_api_answers_in_flight_bytes": &c.answers, "metrics_ring_api_builds_kept_bytes": &c.keptBuild}
}

// printCarried prints the means and slopes of what the server carried (load, requests and answers in flight).
func printCarried(t table) {
	// What the server carried: a live heap that rises with these (a busier machine, more answers in flight) and
	// not in the profiles' heap after a forced collection is load, not a leak.
	for _, c := range []struct {
		label string
		unit  float64
		v     func(carried) float64
	}{
		{"machine load average (1 min)", 1, func(c carried) float64 { return c.load1 }},
		{"read requests in flight", 1, func(c carried) float64 { return c.reads }},
		{"answers in flight, MiB", 1 << 20, func(c carried) float64 { return c.answers }},
		{"readers' builds kept, MiB", 1 << 20, func(c carried) float64 { return c.keptBuild }},
		{"server's CPU, cores", 1, func(c carried) float64 { return c.serverCores }},
		{"the other processes' CPU, cores", 1, func(c carried) float64 { return c.othersCores }},
	} {
		value := func(m memSample) float64 { return c.v(m.carried) / c.unit }
		t.row(c.label+": mean after warm-up", false, func(v float64) string { return fmt.Sprintf("%.2f", v) }, soakValue(func(x *soakResult) float64 {
			return meanOf(x.samples, x.warmup, value)
		}))
		t.row("  its slope after warm-up", false, func(v float64) string { return fmt.Sprintf("%+.2f /h", v) }, soakValue(func(x *soakResult) float64 { return slopePerHour(x.samples, x.warmup, value) }))
	}
}
