//go:build !linux

package framework

import "syscall"

// procAttr puts the child in its own process group so Stop kills the group. Without Linux's Pdeathsig, a
// test binary killed hard may leave children behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
