package framework

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// kubectlTimeout bounds every kubectl call, so that a hung aggregator fails a test instead of the whole run.
const kubectlTimeout = time.Minute

// Kubectl runs the built kubectl with kubeconfig (the admin's when empty) and returns what a user reads: its
// stdout, then its stderr (kubectl's errors and warnings, which tests check too). The e2e tests drive the
// pinned kubectl, not client-go alone, because kubectl top is how users meet metrics-ring.
func (cp *ControlPlane) Kubectl(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	stdout, stderr, err := cp.KubectlStreams(ctx, "", kubeconfig, args...)
	return stdout + stderr, err
}

// KubectlOutput is Kubectl returning stdout alone, with stderr only in the error: a warning on stderr must not
// spoil -o json or a kustomize rendering fed to the next command.
func (cp *ControlPlane) KubectlOutput(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	stdout, _, err := cp.KubectlStreams(ctx, "", kubeconfig, args...)
	return stdout, err
}

// KubectlStreams runs kubectl with stdin (for `apply -f -`; none when empty) and kubeconfig (the admin's when
// empty) and returns stdout and stderr apart, for tests that check that nothing went to stderr. The error
// names the command and carries both streams.
func (cp *ControlPlane) KubectlStreams(ctx context.Context, stdin, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	if kubeconfig == "" {
		kubeconfig = cp.AdminKubeconfig
	}
	ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cp.Tools.Kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		return o.String(), e.String(), fmt.Errorf("kubectl %s: %w: %s%s", strings.Join(args, " "), err, e.Bytes(), o.Bytes())
	}
	return o.String(), e.String(), nil
}
