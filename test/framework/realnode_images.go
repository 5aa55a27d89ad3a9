package framework

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The real node's images, all test/cmd/workload (no registry is reachable: they are built here and imported
// into containerd under the names pods use, with imagePullPolicy Never or IfNotPresent).
const (
	// PauseImage is the sandbox image (containerd's sandbox_image): workload -pause.
	PauseImage = "metrics-ring-test/pause:v1"
	// WorkloadImage runs workload: pass -millicores, -memory-mib, -duration, -exit-code as args.
	WorkloadImage = "metrics-ring-test/workload:v1"
	// ResourceConsumerImage stands in for the image metrics-server's end-to-end suite runs: the binary is also
	// /consume-cpu/consume-cpu and /usr/bin/stress, which take that image's command lines (cmd/workload's
	// consumer.go). The suite's pods name it and pull if not present: it must be there under this name.
	ResourceConsumerImage = "registry.k8s.io/e2e-test-images/resource-consumer:1.9"
)

// imagePath is the PATH of the images, as a Linux distribution's image sets it (stress is found on it).
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// FullImageName is the name containerd stores an image under (docker.io/ made explicit).
func FullImageName(image string) string { return "docker.io/" + image }

// importNodeImages builds the images into dir and imports them into the containerd at socket (namespace
// k8s.io, the CRI's).
func importNodeImages(ctx context.Context, dir, ctr, socket string, out io.Writer) error {
	archive, err := buildNodeImages(ctx, dir, out)
	if err != nil {
		return err
	}
	return ctrImport(ctx, ctr, socket, archive)
}

// ImportImages imports an image archive (docker save or OCI layout, as `make image-archive` writes) into the
// node's containerd, for the CRI (namespace k8s.io): pods naming one of its images then run it without a pull.
func (n *RealNode) ImportImages(ctx context.Context, archive string) error {
	return ctrImport(ctx, n.progs.Ctr, containerdSocket(n.stateDir), archive)
}

// ctrImport runs ctr images import for linux/amd64 only: without --platform, ctr 1.6 wants every platform of
// a multi-platform index present.
func ctrImport(ctx context.Context, ctr, socket, archive string) error {
	cmd := exec.CommandContext(ctx, ctr, "-a", socket, "-n", "k8s.io", "images", "import", "--platform", "linux/amd64", archive)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", archive, err, tailLines(o, 10))
	}
	return nil
}

// buildNodeImages compiles test/cmd/workload statically and writes every image to one docker-save archive.
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
	layer, err := filesLayer(map[string][]byte{"workload": data})
	if err != nil {
		return "", err
	}
	consumer, err := filesLayer(map[string][]byte{"consume-cpu/consume-cpu": data, "usr/bin/stress": data})
	if err != nil {
		return "", err
	}
	refs := map[name.Reference]v1.Image{}
	for _, im := range []struct {
		image      string
		entrypoint []string
		layer      v1.Layer
	}{
		{PauseImage, []string{"/workload", "-pause"}, layer},
		{WorkloadImage, []string{"/workload"}, layer},
		{ResourceConsumerImage, []string{"/usr/bin/stress"}, consumer},
	} {
		image, layer := im.image, im.layer
		img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
			Architecture: "amd64", OS: "linux", Created: v1.Time{Time: time.Unix(0, 0)},
			Config: v1.Config{Entrypoint: im.entrypoint, WorkingDir: "/", Env: []string{imagePath}},
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

// filesLayer is a layer holding each executable at its path (relative to /), with the folders above it.
func filesLayer(files map[string][]byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			hdr := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, fmt.Errorf("writing the layer: %w", err)
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o755, Size: int64(len(files[p])), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing the layer: %w", err)
		}
		if _, err := tw.Write(files[p]); err != nil {
			return nil, fmt.Errorf("writing the layer: %w", err)
		}
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
