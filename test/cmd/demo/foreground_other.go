//go:build !linux

package main

// takeTerminal is Linux-only (see foreground_linux.go); elsewhere Ctrl-C reaches make too, as before.
func takeTerminal() (giveBack func()) { return func() {} }
