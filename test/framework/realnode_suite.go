package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// The real node packages (e2e/realnode, e2e/realinstall) skip where no real node can start, saying why, except
// under CI=true: CI is a machine that can run one, so there a missing real node is a failure, not a skip.

// RealNodeSkip says, before anything is built, why a package's real node tests skip on this machine
// (RealNodePreflight), or "" when a node can start. Under CI=true that reason is returned as an error instead.
func RealNodeSkip() (string, error) {
	reason := RealNodePreflight()
	switch {
	case reason == nil:
		return "", nil
	case os.Getenv("CI") == "true":
		return "", fmt.Errorf("%w (CI=true: failing instead of skipping)", reason)
	}
	return reason.Error(), nil
}

// StartRealNode starts a real node named name for the suite's tests (StartRealNode, its logs in the suite's
// folder) and stops it when the suite ends, after writing its logs' tails if the run failed. When this machine
// cannot run one, it returns no node and why, for the tests to skip with; under CI=true that is an error.
func (s *Suite) StartRealNode(ctx context.Context, name string) (node *RealNode, skip string, err error) {
	node, err = StartRealNode(ctx, s.CP, name, s.Dir, os.Stderr)
	if err != nil {
		if errors.Is(err, ErrNoRealNode) && os.Getenv("CI") != "true" {
			return nil, err.Error(), nil
		}
		return nil, "", err
	}
	s.OnExit(func(failed bool) {
		if failed {
			node.DumpLogs(os.Stderr, 60)
		}
		node.Stop()
	})
	fmt.Fprintf(os.Stderr, "%s: node %s Ready (kubelet %s)\n", s.Name, name, node.KubeletVersion)
	return node, "", nil
}
