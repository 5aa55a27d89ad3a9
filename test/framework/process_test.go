package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProcessEnv checks that a process's Env reaches it on top of this process's environment, and that a process
// without one gets this process's environment unchanged (the soak's -server-env reaches the server alone).
func TestProcessEnv(t *testing.T) {
	t.Setenv("FRAMEWORK_TEST_INHERITED", "kept")
	t.Setenv("FRAMEWORK_TEST_ADDED", "")
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"added", []string{"FRAMEWORK_TEST_ADDED=set"}, "kept set"},
		{"none", nil, "kept "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := NewProcess(dir, "env", "/bin/sh", "-c", `echo "$FRAMEWORK_TEST_INHERITED $FRAMEWORK_TEST_ADDED"`)
			p.Env = tc.env
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				if done, _ := p.Exited(); done {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the process did not exit")
				}
				time.Sleep(10 * time.Millisecond)
			}
			out, err := os.ReadFile(filepath.Join(dir, "env.log"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if got := lines[len(lines)-1]; got != tc.want {
				t.Errorf("the process printed %q, want %q", got, tc.want)
			}
		})
	}
}
