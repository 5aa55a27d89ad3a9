package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"time"
)

// prometheusInstallTimeout bounds apt-get (update plus install) on a slow mirror.
const prometheusInstallTimeout = 10 * time.Minute

// policyRCD is Debian's hook asking whether a maintainer script may start a service (invoke-rc.d and
// deb-systemd-invoke both consult it); exit status 101 means no.
const policyRCD = "/usr/sbin/policy-rc.d"

// EnsurePrometheus returns the path of a prometheus binary: the one on PATH (Debian's is /usr/bin/prometheus),
// or else Debian's prometheus package, installed with apt-get (--no-install-recommends). It fails, never skips,
// when neither is possible, so CI proves the Prometheus tests ran. The package is installed without starting
// (or enabling) its system service: the tests run their own Prometheus on loopback, and a system one would
// listen on every interface.
func EnsurePrometheus(out io.Writer) (string, error) {
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/prometheus"); err == nil {
		return "/usr/bin/prometheus", nil
	}
	const hint = "install Debian's prometheus package (apt-get install -y --no-install-recommends prometheus) " +
		"or put a prometheus binary on PATH"
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", fmt.Errorf("prometheus is not on PATH and there is no apt-get to install it: %s", hint)
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("prometheus is not on PATH and installing it needs root (running as uid %d): %s", os.Geteuid(), hint)
	}
	fmt.Fprintln(out, "prometheus not found: installing Debian's prometheus package with apt-get install -y --no-install-recommends prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), prometheusInstallTimeout)
	defer cancel()
	err := withoutServiceStarts(policyRCD, func() error {
		install := []string{"install", "-y", "--no-install-recommends", "prometheus"}
		outp, err := aptGet(ctx, install...)
		if err != nil && aptListsMissing(outp) {
			// A fresh image has no package lists: fetch them once and try again.
			fmt.Fprintln(out, "apt-get found no prometheus package: running apt-get update first")
			if o, uerr := aptGet(ctx, "update"); uerr != nil {
				return fmt.Errorf("apt-get update: %w: %s (%s)", uerr, tailLines([]byte(o), 10), hint)
			}
			outp, err = aptGet(ctx, install...)
		}
		if err != nil {
			return fmt.Errorf("apt-get install prometheus: %w: %s (%s)", err, tailLines([]byte(outp), 10), hint)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	disableSystemService(ctx, out)
	p, err := exec.LookPath("prometheus")
	if err != nil {
		p = "/usr/bin/prometheus"
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("apt-get installed the prometheus package but there is no prometheus binary: %w", err)
		}
	}
	fmt.Fprintf(out, "installed %s (its system service neither started nor enabled)\n", p)
	return p, nil
}

// withoutServiceStarts runs fn with a policy-rc.d at path that denies every service start, as container
// images ship, unless one is already there (which is then the machine owner's choice and left alone).
func withoutServiceStarts(path string, fn func() error) error {
	if _, err := os.Lstat(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return fn()
	}
	const deny = "#!/bin/sh\n# written by the metrics-ring tests while installing prometheus: start no service\nexit 101\n"
	if err := os.WriteFile(path, []byte(deny), 0o755); err != nil {
		return fmt.Errorf("writing %s so that installing prometheus starts no service: %w", path, err)
	}
	defer os.Remove(path)
	return fn()
}

// disableSystemService undoes the package's enabling of prometheus.service under systemd, so that it does
// not start at the next boot either. Elsewhere (no systemd) there is nothing to undo: policy-rc.d covered it.
func disableSystemService(ctx context.Context, out io.Writer) {
	disableService(ctx, out, "prometheus.service")
}

// disableService stops and disables unit under systemd, when systemd runs.
func disableService(ctx context.Context, out io.Writer, unit string) {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return
	}
	if o, err := exec.CommandContext(ctx, "systemctl", "disable", "--now", unit).CombinedOutput(); err != nil {
		fmt.Fprintf(out, "systemctl disable --now %s: %v: %s\n", unit, err, o)
	}
}

// aptListsMissing reports whether apt-get failed for want of package lists rather than for another reason.
func aptListsMissing(out string) bool {
	return strings.Contains(out, "Unable to locate package") || strings.Contains(out, "has no installation candidate") ||
		strings.Contains(out, "404") || strings.Contains(out, "Failed to fetch")
}

// PrometheusVersion is what `prometheus --version` prints first, e.g. "prometheus, version 2.42.0+ds (branch: ...)".
func PrometheusVersion(binary string) (string, error) {
	out, err := exec.Command(binary, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w: %s", binary, err, out)
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]), nil
}

// aptGet runs apt-get non-interactively, waiting for the dpkg lock rather than failing when another apt-get
// holds it, and returns its combined output.
func aptGet(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-o", "DPkg::Lock::Timeout=300", "-q"}, args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
