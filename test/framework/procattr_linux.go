package framework

import "syscall"

// procAttr puts the child in its own process group (Stop kills the group) and asks the kernel to kill it
// if the test binary dies (go test timeout, a second Ctrl-C), so no orphan keeps holding ports.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
