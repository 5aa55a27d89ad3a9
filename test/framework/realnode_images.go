package framework

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The real node's images, both test/cmd/workload (no registry is reachable: they are built here and imported
// into containerd under the names pods use, with imagePullPolicy Never).
const (
	// PauseImage is the sandbox image (containerd's sandbox_image): workload -pause.
	PauseImage = "metrics-ring-test/pause:v1"
	// WorkloadImage runs workload: pass -millicores, -memory-mib, -duration, -exit-code as args.
	WorkloadImage = "metrics-ring-test/workload:v1"
)

// FullImageName is the name containerd stores an image under (docker.io/ made explicit).
func FullImageName(image string) string { return "docker.io/" + image }

// importNodeImages builds the images into dir and imports them into the containerd at socket (namespace
// k8s.io, the CRI's).
func importNodeImages(ctx context.Context, dir, ctr, socket string, out io.Writer) error {
	archive, err := buildNodeImages(ctx, dir, out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, ctr, "-a", socket, "-n", "k8s.io", "images", "import", "--platform", "linux/amd64", archive)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", archive, err, tailLines(o, 10))
	}
	return nil
}

// buildNodeImages compiles test/cmd/workload statically and writes both images to one docker-save archive.
func buildNodeImages(ctx context.Context, dir string, out io.Writer) (string, error) {
	modDir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "workload")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/workload")
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/workload in %s: %w", modDir, err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", bin, err)
	}
	layer, err := workloadLayer(data)
	if err != nil {
		return "", err
	}
	refs := map[name.Reference]v1.Image{}
	for image, entrypoint := range map[string][]string{
		PauseImage:    {"/workload", "-pause"},
		WorkloadImage: {"/workload"},
	} {
		img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
			Architecture: "amd64", OS: "linux", Created: v1.Time{Time: time.Unix(0, 0)},
			Config: v1.Config{Entrypoint: entrypoint, WorkingDir: "/"},
			RootFS: v1.RootFS{Type: "layers"},
		})
		if err == nil {
			img, err = mutate.AppendLayers(img, layer)
		}
		if err != nil {
			return "", fmt.Errorf("image %s: %w", image, err)
		}
		tag, err := name.NewTag(image)
		if err != nil {
			return "", fmt.Errorf("image name %s: %w", image, err)
		}
		refs[tag] = img
	}
	archive := filepath.Join(dir, "images.tar")
	if err := tarball.MultiRefWriteToFile(archive, refs); err != nil {
		return "", fmt.Errorf("writing %s: %w", archive, err)
	}
	return archive, nil
}

// workloadLayer is a layer holding the binary at /workload.
func workloadLayer(binary []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: "workload", Mode: 0o755, Size: int64(len(binary)), ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("writing the layer: %w", err)
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, fmt.Errorf("writing the layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("writing the layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	return layer, nil
}
