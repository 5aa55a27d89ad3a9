//go:build !linux

package main

// evictFromPageCache is a no-op off Linux.
func evictFromPageCache(string) error { return nil }
