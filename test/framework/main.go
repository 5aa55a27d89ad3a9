package framework

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// runMain is RunSuite's frame, around the set-up and the tests: it skips in -short mode, gives setupAndRun a new
// folder for the run's logs and certificates, and removes that folder after a passing run unless E2E_KEEP is set
// (a failing run always keeps it, and says where). name (e.g. "e2e/deploy") prefixes every line it prints.
func runMain(m *testing.M, name string, setupAndRun func(m *testing.M, dir string) (int, error)) int {
	if testing.Short() {
		fmt.Fprintf(os.Stderr, "%s: skipped in -short mode\n", name)
		return 0
	}
	dir, err := os.MkdirTemp("", "metrics-ring-"+strings.ReplaceAll(name, "/", "-")+"-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	code, err := setupAndRun(m, dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s setup: %v\n", name, err)
		code = 1
	}
	if code == 0 && os.Getenv("E2E_KEEP") == "" {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "%s: logs and certificates kept in %s\n", name, dir)
	}
	return code
}

// RunSuite is an end-to-end package's whole TestMain: it parses the flags, sets up cfg's cluster in a new
// folder (see runMain), runs the tests, tears the cluster down and returns the exit code.
func RunSuite(m *testing.M, cfg SuiteConfig) int {
	flag.Parse()
	return runMain(m, cfg.Name, func(m *testing.M, dir string) (code int, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
		defer cancel()
		s := &Suite{Name: cfg.Name, Dir: dir}
		defer func() {
			failed := code != 0 || err != nil
			for i := len(s.onExit) - 1; i >= 0; i-- {
				s.onExit[i](failed)
			}
		}()
		if err := s.setup(ctx, cfg); err != nil {
			return 1, err
		}
		return m.Run(), nil
	})
}
