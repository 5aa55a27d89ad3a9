package framework

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// HelmVersion is the helm v3 the chart tests run, built from the Go module proxy.
const HelmVersion = "v3.22.0"

const helmPkg = "helm.sh/helm/v3/cmd/helm"

// EnsureHelm builds helm HelmVersion into cacheDir when missing (the path carries the version, so a bump
// rebuilds) and returns its path. It builds in module mode from an empty directory (`go install pkg@version`):
// helm's own go.mod decides its dependencies, so its k8s.io modules never meet the test module's pinned ones.
func EnsureHelm(cacheDir string, out io.Writer) (string, error) {
	return cachedBuild(cacheDir, "helm-"+HelmVersion, "helm", out, func(dst string) error { return buildHelm(dst, out) })
}

func buildHelm(dst string, out io.Writer) error {
	tmp, err := buildDir(dst)
	if err != nil {
		return fmt.Errorf("helm: %w", err)
	}
	defer os.RemoveAll(tmp)
	args := []string{"install", "-trimpath",
		"-ldflags=-X helm.sh/helm/v3/internal/version.version=" + HelmVersion,
		helmPkg + "@" + HelmVersion}
	fmt.Fprintf(out, "building helm %s (first time: a few minutes): GOBIN=%s go %v, in module mode outside test/go.mod\n",
		HelmVersion, tmp, args)
	cmd := exec.Command("go", args...)
	cmd.Dir = tmp
	// GOFLAGS from the caller (-mod=vendor, say) would not apply to helm's module; GOWORK=off keeps a workspace
	// out of it.
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go install %s@%s: %w", helmPkg, HelmVersion, err)
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), dst); err != nil {
		return fmt.Errorf("installing %s: %w", dst, err)
	}
	return nil
}
