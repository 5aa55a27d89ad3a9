package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// NodePrograms are the host programs a real node runs beside the kubelet built here: Debian's containerd
// (with ctr and the runc v2 shim), runc and the CNI plugins.
type NodePrograms struct {
	Containerd, Ctr, Runc string
	// CNIBinDir holds bridge, host-local and loopback.
	CNIBinDir string
}

// nodePackage is one program a real node needs and the Debian package that ships it.
type nodePackage struct{ pkg, path string }

var nodePackages = []nodePackage{
	{"containerd", "/usr/bin/containerd"},
	{"containerd", "/usr/bin/containerd-shim-runc-v2"},
	{"containerd", "/usr/bin/ctr"},
	{"runc", "/usr/sbin/runc"},
	{"containernetworking-plugins", "/usr/lib/cni/bridge"},
	{"containernetworking-plugins", "/usr/lib/cni/host-local"},
	{"containernetworking-plugins", "/usr/lib/cni/loopback"},
	// The kubelet makes its chains with it; the real node tests were proven with it installed.
	{"iptables", "/usr/sbin/iptables"},
}

// ErrNoRealNode marks why a real node cannot start on this machine (not root, no apt-get to install what is
// missing, not Linux): tests skip on it, or fail under CI=true.
var ErrNoRealNode = errors.New("a real node cannot start here")

// EnsureNodePrograms returns Debian's containerd, runc and CNI plugins, installing the missing packages with
// apt-get (--no-install-recommends) as root, with no service started (containerd's system service would
// listen on /run/containerd and survive the tests) and the containerd service disabled under systemd.
func EnsureNodePrograms(out io.Writer) (NodePrograms, error) {
	var missing []string
	for _, p := range nodePackages {
		if _, err := os.Stat(p.path); err != nil && !slices.Contains(missing, p.pkg) {
			missing = append(missing, p.pkg)
		}
	}
	progs := NodePrograms{Containerd: "/usr/bin/containerd", Ctr: "/usr/bin/ctr", Runc: "/usr/sbin/runc", CNIBinDir: "/usr/lib/cni"}
	if len(missing) == 0 {
		return progs, nil
	}
	hint := "install Debian's packages: apt-get install -y --no-install-recommends " + strings.Join(missing, " ")
	if os.Geteuid() != 0 {
		return progs, fmt.Errorf("%w: not root (uid %d), and %s are missing: %s", ErrNoRealNode, os.Geteuid(), strings.Join(missing, ", "), hint)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return progs, fmt.Errorf("%w: no apt-get to install %s: %s", ErrNoRealNode, strings.Join(missing, ", "), hint)
	}
	fmt.Fprintf(out, "real node: installing Debian's %s with apt-get\n", strings.Join(missing, ", "))
	ctx, cancel := context.WithTimeout(context.Background(), prometheusInstallTimeout)
	defer cancel()
	err := withoutServiceStarts(policyRCD, func() error {
		install := append([]string{"install", "-y", "--no-install-recommends"}, missing...)
		outp, err := aptGet(ctx, install...)
		if err != nil && aptListsMissing(outp) {
			fmt.Fprintln(out, "apt-get found no package: running apt-get update first")
			if o, uerr := aptGet(ctx, "update"); uerr != nil {
				return fmt.Errorf("%w: apt-get update: %v: %s (%s)", ErrNoRealNode, uerr, tailLines([]byte(o), 10), hint)
			}
			outp, err = aptGet(ctx, install...)
		}
		if err != nil {
			return fmt.Errorf("%w: apt-get install %s: %v: %s (%s)", ErrNoRealNode, strings.Join(missing, " "), err, tailLines([]byte(outp), 10), hint)
		}
		return nil
	})
	if err != nil {
		return progs, err
	}
	disableService(ctx, out, "containerd.service")
	for _, p := range nodePackages {
		if _, err := os.Stat(p.path); err != nil {
			return progs, fmt.Errorf("apt-get installed %s but %s is missing: %w", p.pkg, filepath.Base(p.path), err)
		}
	}
	return progs, nil
}

// EnsureKubelet builds the kubelet of the pinned k8s.io/kubernetes into cacheDir, once per version.
func EnsureKubelet(cacheDir string, out io.Writer) (string, error) {
	return ensureKubernetesCommand(cacheDir, "kubelet", out)
}

// EnsureScheduler builds kube-scheduler of the pinned k8s.io/kubernetes into cacheDir, once per version: only a
// real install (pods scheduled onto a real node) needs it, so it is not among the control-plane tools.
func EnsureScheduler(cacheDir string, out io.Writer) (string, error) {
	return ensureKubernetesCommand(cacheDir, "kube-scheduler", out)
}

// ensureKubernetesCommand builds k8s.io/kubernetes/cmd/<name> at the pinned version into cacheDir, once per
// version, with the version stamped in as the control-plane tools have it.
func ensureKubernetesCommand(cacheDir, name string, out io.Writer) (string, error) {
	modDir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	versions, err := moduleVersions(modDir)
	if err != nil {
		return "", err
	}
	v := versions["k8s.io/kubernetes"]
	if v == "" {
		return "", fmt.Errorf("module k8s.io/kubernetes is not in %s/go.mod", modDir)
	}
	return cachedBuild(cacheDir, name+"-"+v, name, out, func(dst string) error {
		fmt.Fprintf(out, "building %s %s (first time: a few minutes)...\n", name, v)
		var ldflags []string
		for _, pkg := range k8sVersionVars {
			ldflags = append(ldflags, versionLDFlags(pkg, v)...)
		}
		return goBuild(modDir, dst, "k8s.io/kubernetes/cmd/"+name, ldflags, out)
	})
}

// RealNodePreflight says, without changing anything, why this machine cannot run a real node (not Linux, not
// root, no non-loopback address, programs missing and no apt-get), or nil: so a package can skip before it
// builds a control plane.
func RealNodePreflight() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%w: %s is not Linux", ErrNoRealNode, runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: a kubelet and containerd need root (running as uid %d)", ErrNoRealNode, os.Geteuid())
	}
	if _, err := nodeIP(); err != nil {
		return err
	}
	for _, p := range nodePackages {
		if _, err := os.Stat(p.path); err != nil {
			if _, err := exec.LookPath("apt-get"); err != nil {
				return fmt.Errorf("%w: %s is missing and there is no apt-get to install Debian's %s", ErrNoRealNode, p.path, p.pkg)
			}
		}
	}
	return nil
}
