// Package version holds the build's version and commit, set at link time:
// go build -ldflags "-X github.com/metrics-ring/metrics-ring/pkg/version.Version=v0.1.0 -X ...version.Commit=abc1234".
package version

import "fmt"

var (
	// Version is the release, e.g. v0.1.0; "dev" for an unversioned build.
	Version = "dev"
	// Commit is the source commit of the build.
	Commit = "unknown"
)

// String is what --version prints.
func String() string { return fmt.Sprintf("metrics-ring %s (commit %s)", Version, Commit) }
