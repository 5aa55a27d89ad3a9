package framework

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// RunMain is an end-to-end package's TestMain after flag.Parse: it skips in -short mode, gives setupAndRun a new
// folder for the run's logs and certificates, and removes that folder after a passing run unless E2E_KEEP is set
// (a failing run always keeps it, and says where). name (e.g. "e2e/deploy") prefixes every line it prints.
func RunMain(m *testing.M, name string, setupAndRun func(m *testing.M, dir string) (int, error)) int {
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
