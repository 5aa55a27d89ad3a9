package main

import (
	"fmt"
	"io"
	"syscall"
)

// wantOpenFiles is what 10,000 simulated nodes need in this process: a listener and an accepted connection per
// node, plus the API clients'. The usual hard limit (often 20,000 or less) stops short of that.
const wantOpenFiles = 1 << 17

// raiseOpenFiles lifts this process's open-file limit (and so its children's: metrics-ring, kube-apiserver) to
// wantOpenFiles when it is lower and the process may (root); otherwise it says what the limit is.
func raiseOpenFiles(out io.Writer, nodes int) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return
	}
	need := uint64(2*nodes + 4096)
	if l.Cur >= need {
		return
	}
	want := l
	want.Cur = max(l.Cur, wantOpenFiles)
	want.Max = max(l.Max, wantOpenFiles)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		fmt.Fprintf(out, "open-file limit %d (hard %d) is below the %d that %d nodes need and cannot be raised (%v): expect failed connections\n",
			l.Cur, l.Max, need, nodes, err)
		return
	}
	fmt.Fprintf(out, "raised the open-file limit from %d to %d for %d simulated nodes\n", l.Cur, want.Cur, nodes)
}
