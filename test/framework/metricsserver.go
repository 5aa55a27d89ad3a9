package framework

import (
	"fmt"
	"io"
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
