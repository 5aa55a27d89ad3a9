package framework

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestWithoutServiceStarts checks the guard that keeps apt-get from starting Prometheus as a system service:
// while the install runs, a policy-rc.d exists and denies (exit 101); afterwards it is gone; an operator's own
// policy is never replaced or removed.
func TestWithoutServiceStarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy-rc.d")
	ran := false
	err := withoutServiceStarts(path, func() error {
		ran = true
		err := exec.Command(path, "prometheus", "start").Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 101 {
			t.Errorf("policy-rc.d during the install: %v, want exit status 101 (deny)", err)
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("withoutServiceStarts: ran %v, err %v", ran, err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("policy-rc.d left behind after the install: %v", err)
	}

	own := []byte("#!/bin/sh\nexit 0\n")
	if err := os.WriteFile(path, own, 0o755); err != nil {
		t.Fatal(err)
	}
	want := errors.New("install failed")
	if err := withoutServiceStarts(path, func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("withoutServiceStarts returned %v, want fn's error %v", err, want)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(own) {
		t.Fatalf("an existing policy-rc.d was changed: %q, %v", got, err)
	}
}
