package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// soakCSVHeader names the columns of the soak's samples file: every 10 s sample of every server, so that a slope
// can be looked at again (halves, another warm-up, a part of the heap) without running the hour again.
var soakCSVHeader = []string{"server", "seconds", "rss_bytes", "rss_anon_bytes", "rss_file_bytes", "heap_inuse_bytes",
	"goroutines", "pods", "heap_live_bytes", "heap_goal_bytes", "heap_objects_bytes", "heap_unused_bytes",
	"heap_free_bytes", "stacks_bytes", "runtime_other_bytes", "load1", "reads_in_flight", "answers_in_flight_bytes",
	"builds_kept_bytes", "server_cpu_cores", "others_cpu_cores"}

// writeSoakCSV writes every server's memory samples; a value not served is written empty.
func (r *result) writeSoakCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(soakCSVHeader); err != nil {
		return err
	}
	f := func(v float64) string {
		if math.IsNaN(v) { // not served
			return ""
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	for _, tr := range r.targets {
		if tr.soak == nil {
			continue
		}
		for _, s := range tr.soak.samples {
			p := s.parts
			if err := cw.Write([]string{tr.name, f(s.at.Seconds()), f(s.rss), f(s.anon), f(s.file), f(s.heap),
				f(s.goroutines), f(s.pods), f(p.live), f(p.goal), f(p.objects), f(p.unused), f(p.free), f(p.stacks),
				f(p.other), f(s.carried.load1), f(s.carried.reads), f(s.carried.answers), f(s.carried.keptBuild),
				f(s.carried.serverCores), f(s.carried.othersCores)}); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// soakCSVPath is where the samples go: beside the plot, with a .csv suffix.
func soakCSVPath(plot string) string { return strings.TrimSuffix(plot, ".svg") + ".csv" }

// writeSoakSamples writes the samples file when the run had a soak.
func (r *result) writeSoakSamples() error {
	if r.opts.soak == 0 {
		return nil
	}
	path := soakCSVPath(r.opts.soakPlot)
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.writeSoakCSV(out); err != nil {
		out.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "soak samples written to %s\n", path)
	return out.Close()
}
