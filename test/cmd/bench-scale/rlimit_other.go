//go:build !linux

package main

import "io"

// raiseOpenFiles is a no-op off Linux: the benchmark's process limits are the caller's to set.
func raiseOpenFiles(io.Writer, int) {}
