package framework

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// MetricsServerModule is the upstream metrics-server the scale benchmark compares metrics-ring with.
const MetricsServerModule = "sigs.k8s.io/metrics-server"

// BuildMetricsServer builds metrics-server at version (e.g. v0.9.0) from its module, as the go command downloads
// it, into cacheDir (once per version) and returns the binary's path. Only the scale benchmark uses it: it runs
// metrics-server against the same simulated cluster so that figures from a shared, noisy machine come as ratios
// measured in one run.
func BuildMetricsServer(cacheDir, version string, out io.Writer) (string, error) {
	modDir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	return cachedBuild(cacheDir, "metrics-server-"+version, "metrics-server", out, func(dst string) error {
		return buildMetricsServer(modDir, dst, version, out)
	})
}

func buildMetricsServer(modDir, dst, version string, out io.Writer) error {
	src, err := metricsServerSource(modDir, version)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "building metrics-server %s (first time: a few minutes)...\n", version)
	// Built in its own module with its own go.sum: the versions it was released with, not ours.
	return goBuild(src, dst, "./cmd/metrics-server", nil, out)
}

// MetricsServerManifests returns the folder of metrics-server's kustomize base at version (its Deployment, RBAC,
// Service and APIService as released), from its module as the go command downloads it: the end-to-end suite
// installs its RBAC and runs metrics-ring with its Deployment's flags, as an operator who changes only the image.
func MetricsServerManifests(version string) (string, error) {
	modDir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	src, err := metricsServerSource(modDir, version)
	if err != nil {
		return "", err
	}
	return filepath.Join(src, "manifests", "base"), nil
}

// metricsServerSource downloads metrics-server's module at version into the module cache and returns its folder.
func metricsServerSource(modDir, version string) (string, error) {
	return moduleSource(modDir, nil, MetricsServerModule, version)
}

// BuildMetricsServerE2E compiles metrics-server's own end-to-end suite (test/e2e_test.go of its module at version,
// unchanged, with the dependencies its go.sum pins) into a test binary in cacheDir, once per version, and returns
// its path. Run against a cluster (KUBECONFIG), it checks a metrics.k8s.io server as metrics-server's CI does.
func BuildMetricsServerE2E(cacheDir, version string, out io.Writer) (string, error) {
	modDir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	return cachedBuild(cacheDir, "metrics-server-e2e-"+version, "e2e.test", out, func(dst string) error {
		src, err := metricsServerSource(modDir, version)
		if err != nil {
			return err
		}
		tmp, err := buildDir(dst)
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		fmt.Fprintf(out, "building metrics-server %s's end-to-end suite (first time: a few minutes)...\n", version)
		cmd := exec.Command("go", "test", "-c", "-o", filepath.Join(tmp, "e2e.test"), "./test")
		cmd.Dir = src
		// Its own module decides: not our GOFLAGS, nor a workspace.
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go test -c ./test in %s: %w", src, err)
		}
		if err := os.Rename(filepath.Join(tmp, "e2e.test"), dst); err != nil {
			return fmt.Errorf("installing %s: %w", dst, err)
		}
		return nil
	})
}
