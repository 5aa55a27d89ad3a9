package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// takeTerminal makes the demo the terminal's foreground process group, so that Ctrl-C interrupts the demo alone.
// Under `make demo` the demo is the child of go run, of the recipe's shell and of make, all in one process group:
// a Ctrl-C sent to all of them made go run exit 1 and make die of SIGINT ("Error 1", status 130) even though the
// demo itself stopped cleanly. With the terminal to itself, the demo stops everything, gives the terminal back and
// exits 0, and so do go run, the shell and make. It returns the function that gives the terminal back; it does
// nothing when stdin is not a terminal (CI, a pipe) or the demo already leads its own group (started by a shell).
func takeTerminal() (giveBack func()) {
	fd := int(os.Stdin.Fd())
	prev, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || syscall.Getpgrp() == os.Getpid() {
		return func() {}
	}
	// A process outside the foreground group that changes the terminal's foreground group is sent SIGTTOU.
	signal.Ignore(syscall.SIGTTOU)
	if syscall.Setpgid(0, 0) != nil {
		return func() {}
	}
	if unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, os.Getpid()) != nil {
		_ = syscall.Setpgid(0, prev) // back to make's group, so a Ctrl-C still stops us as before
		return func() {}
	}
	return func() { _ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, prev) }
}
