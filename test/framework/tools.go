package framework

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Tools are the paths of the programs a run needs.
type Tools struct {
	Etcd, APIServer, ControllerManager, Kubectl, MetricsRing string
}

const testModule = "github.com/metrics-ring/metrics-ring/test"

// ModuleDir finds the test module's directory by walking up from the working directory (go test runs in
// the package directory, make and go run in the repository or test directory).
func ModuleDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting working directory: %w", err)
	}
	for {
		for _, cand := range []string{dir, filepath.Join(dir, "test")} {
			if data, err := os.ReadFile(filepath.Join(cand, "go.mod")); err == nil &&
				bytes.Contains(data, []byte("module "+testModule+"\n")) {
				return cand, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", testModule)
		}
		dir = parent
	}
}

// DefaultCacheDir is $METRICS_RING_CACHE, else the user cache directory's metrics-ring folder.
func DefaultCacheDir() string {
	if d := os.Getenv("METRICS_RING_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "metrics-ring")
	}
	return filepath.Join(os.TempDir(), "metrics-ring-cache")
}

// tool is one program built from a pinned module.
type tool struct {
	name, module, pkg string
	// versionVars are -X link flags filled with the module version, so `kubectl version` and the server's
	// /version tell the truth instead of v0.0.0-master.
	versionVars []string
}

var pinnedTools = []tool{
	{name: "etcd", module: "go.etcd.io/etcd/server/v3", pkg: "./tools/etcd"},
	{name: "kube-apiserver", module: "k8s.io/kubernetes", pkg: "k8s.io/kubernetes/cmd/kube-apiserver", versionVars: k8sVersionVars},
	{name: "kube-controller-manager", module: "k8s.io/kubernetes", pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", versionVars: k8sVersionVars},
	{name: "kubectl", module: "k8s.io/kubernetes", pkg: "k8s.io/kubernetes/cmd/kubectl", versionVars: k8sVersionVars},
}

var k8sVersionVars = []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"}

// EnsureTools builds the control-plane tools (EnsureControlPlaneTools) and metrics-ring (BuildMetricsRing).
func EnsureTools(cacheDir string, out io.Writer) (Tools, error) {
	t, err := EnsureControlPlaneTools(cacheDir, out)
	if err != nil {
		return t, err
	}
	t.MetricsRing, err = BuildMetricsRing(cacheDir, out)
	return t, err
}

// EnsureControlPlaneTools builds etcd, kube-apiserver, kube-controller-manager and kubectl into cacheDir when
// a binary for the pinned version is missing (the path carries the version, so a bump rebuilds). Progress
// goes to out.
func EnsureControlPlaneTools(cacheDir string, out io.Writer) (Tools, error) {
	modDir, err := ModuleDir()
	if err != nil {
		return Tools{}, err
	}
	versions, err := moduleVersions(modDir)
	if err != nil {
		return Tools{}, err
	}
	unlock, err := lockCache(cacheDir, out)
	if err != nil {
		return Tools{}, err
	}
	defer unlock()
	platform := runtime.GOOS + "_" + runtime.GOARCH
	paths := map[string]string{}
	for _, t := range pinnedTools {
		v := versions[t.module]
		if v == "" {
			return Tools{}, fmt.Errorf("module %s is not in %s/go.mod", t.module, modDir)
		}
		dst := filepath.Join(cacheDir, platform, t.name+"-"+v, t.name)
		paths[t.name] = dst
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		fmt.Fprintf(out, "building %s %s (first time: a few minutes)...\n", t.name, v)
		var ldflags []string
		for _, pkg := range t.versionVars {
			ldflags = append(ldflags, versionLDFlags(pkg, v)...)
		}
		if err := goBuild(modDir, dst, t.pkg, ldflags, out); err != nil {
			return Tools{}, err
		}
	}
	return Tools{
		Etcd: paths["etcd"], APIServer: paths["kube-apiserver"], ControllerManager: paths["kube-controller-manager"],
		Kubectl: paths["kubectl"],
	}, nil
}

// BuildMetricsRing always rebuilds metrics-ring from the main module (go build is incremental, so an
// unchanged tree costs a link at most) and returns the binary's path.
func BuildMetricsRing(cacheDir string, out io.Writer) (string, error) {
	modDir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	unlock, err := lockCache(cacheDir, out)
	if err != nil {
		return "", err
	}
	defer unlock()
	// One binary per checkout: test runs of two worktrees at once must each run their own code.
	checkout := sha256.Sum256([]byte(filepath.Dir(modDir)))
	mr := filepath.Join(cacheDir, runtime.GOOS+"_"+runtime.GOARCH, "metrics-ring", hex.EncodeToString(checkout[:6]), "metrics-ring")
	fmt.Fprintf(out, "building metrics-ring from %s...\n", filepath.Dir(modDir))
	if err := goBuild(filepath.Dir(modDir), mr, "./cmd/metrics-ring", nil, out); err != nil {
		return "", err
	}
	return mr, nil
}

func versionLDFlags(pkg, v string) []string {
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	return []string{
		"-X", pkg + ".gitVersion=" + v,
		"-X", pkg + ".gitMajor=" + major,
		"-X", pkg + ".gitMinor=" + minor,
		"-X", pkg + ".gitTreeState=clean",
	}
}

// goBuild builds into a temporary name and renames, so an interrupted build never leaves a binary that
// looks complete.
func goBuild(dir, dst, pkg string, ldflags []string, out io.Writer) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(dst), err)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", dst, os.Getpid())
	args := []string{"build", "-o", tmp}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags="+strings.Join(ldflags, " "))
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("go build %s in %s: %w", pkg, dir, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("installing %s: %w", dst, err)
	}
	return nil
}

// moduleVersions asks the go command for the versions the test module requires.
func moduleVersions(modDir string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Version}}", "k8s.io/kubernetes", "go.etcd.io/etcd/server/v3")
	cmd.Dir = modDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m in %s: %w: %s", modDir, err, stderr.String())
	}
	versions := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(outb))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 {
			versions[f[0]] = f[1]
		}
	}
	return versions, nil
}

// cachedBuild returns cacheDir/<platform>/<dir>/<name>, calling build to make it first when it is missing (the
// directory carries the version, so a bump rebuilds), under the cache lock.
func cachedBuild(cacheDir, dir, name string, out io.Writer, build func(dst string) error) (string, error) {
	unlock, err := lockCache(cacheDir, out)
	if err != nil {
		return "", err
	}
	defer unlock()
	dst := filepath.Join(cacheDir, runtime.GOOS+"_"+runtime.GOARCH, dir, name)
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	start := time.Now()
	if err := build(dst); err != nil {
		return dst, err
	}
	// What a cold run spends where, in its log.
	fmt.Fprintf(out, "built %s in %.0f s\n", dst, time.Since(start).Seconds())
	return dst, nil
}

// lockCache serializes builds into cacheDir across processes (go test runs packages in parallel; a demo may
// start while tests build), so a tool is built once and never written by two builds at the same time.
func lockCache(cacheDir string, out io.Writer) (func(), error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", cacheDir, err)
	}
	f, err := os.OpenFile(filepath.Join(cacheDir, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening build lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintf(out, "waiting for another build into %s...\n", cacheDir)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
		}
	}
	return func() { f.Close() }, nil
}
