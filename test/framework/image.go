package framework

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"time"
)

// BuildMetricsRingImage builds metrics-ring's image as `make image-archive IMAGE=<image>
// IMAGE_PLATFORMS=linux/amd64` does (test/cmd/image, from this repository's main module) into dir, and returns
// the archive's path: a real node imports it (RealNode.ImportImages) to run the chart and the overlays' pods.
// One platform only: a real node here is linux/amd64, and another would cross-compile every dependency.
func BuildMetricsRingImage(ctx context.Context, dir, image string, out io.Writer) (string, error) {
	modDir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "metrics-ring-image.tar")
	fmt.Fprintf(out, "building metrics-ring's image %s into %s\n", image, archive)
	cmd := exec.CommandContext(ctx, "go", "run", "./cmd/image", "-src", filepath.Dir(modDir), "-o", archive,
		"-image", image, "-platforms", "linux/amd64", "-version", "e2e")
	cmd.Dir = modDir
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go run ./cmd/image in %s: %w", modDir, err)
	}
	fmt.Fprintf(out, "built metrics-ring's image in %.0f s\n", time.Since(start).Seconds())
	return archive, nil
}
