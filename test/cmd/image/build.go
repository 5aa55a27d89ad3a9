package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths inside the image; the test checks that these, and their parent directories, are all there is.
const (
	binaryPath  = "metrics-ring"
	caCertsPath = "etc/ssl/certs/ca-certificates.crt"
	nonRootUser = "65532:65532"
)

type options struct {
	Src, Out, Image           string
	Version, Revision, Source string
	LDFlags, CACerts          string
	Platforms                 []string
	Created                   time.Time
}

// build compiles one binary per platform, makes one image of each, and writes the archive.
func build(ctx context.Context, o options, log io.Writer) error {
	if len(o.Platforms) == 0 {
		return fmt.Errorf("no platform given")
	}
	names, err := parseImageName(o.Image)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(o.CACerts)
	if err != nil {
		return fmt.Errorf("reading CA certificates (-ca-certs): %w", err)
	}
	tmp, err := os.MkdirTemp("", "metrics-ring-image-")
	if err != nil {
		return fmt.Errorf("creating a build directory: %w", err)
	}
	defer os.RemoveAll(tmp)

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var hostImage v1.Image
	for _, p := range o.Platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil || plat.OS != "linux" || plat.Architecture == "" {
			return fmt.Errorf("platform %q: want linux/<arch>, e.g. linux/amd64", p)
		}
		bin := filepath.Join(tmp, "metrics-ring-"+plat.Architecture)
		fmt.Fprintf(log, ">> go build %s (CGO_ENABLED=0, -trimpath) from %s\n", p, o.Src)
		if err := goBuild(ctx, o.Src, bin, plat.Architecture, o.LDFlags, log); err != nil {
			return err
		}
		img, err := platformImage(o, plat, bin, ca)
		if err != nil {
			return fmt.Errorf("image for %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
		if hostImage == nil || plat.Architecture == runtime.GOARCH {
			hostImage = img
		}
	}
	annotated, ok := mutate.Annotations(idx, labels(o)).(v1.ImageIndex)
	if !ok {
		return fmt.Errorf("annotating the index: unexpected type")
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(o.Out), err)
	}
	part := o.Out + ".tmp"
	if err := writeArchiveFile(part, annotated, hostImage, names, o.Created); err != nil {
		os.Remove(part)
		return err
	}
	if err := os.Rename(part, o.Out); err != nil {
		return fmt.Errorf("installing %s: %w", o.Out, err)
	}
	d, err := annotated.Digest()
	if err != nil {
		return fmt.Errorf("index digest: %w", err)
	}
	fi, err := os.Stat(o.Out)
	if err != nil {
		return fmt.Errorf("checking %s: %w", o.Out, err)
	}
	fmt.Fprintf(log, ">> wrote %s (%.1f MiB): OCI image index %s for %s, tagged %s\n", o.Out,
		float64(fi.Size())/(1<<20), d, strings.Join(o.Platforms, ", "), names.familiar)
	fmt.Fprintf(log, "   load it with: docker load -i %s   (or: podman load -i %s)\n", o.Out, o.Out)
	return nil
}

// goBuild cross-compiles the static binary the way `make build` does, for linux/arch.
func goBuild(ctx context.Context, src, dst, arch, ldflags string, log io.Writer) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", dst, "./cmd/metrics-ring")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for linux/%s in %s: %w", arch, src, err)
	}
	return nil
}

func labels(o options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.source":   o.Source,
	}
}

// platformImage is one OCI image: a single layer with the binary and the CA bundle, run as the nonroot user.
func platformImage(o options, plat *v1.Platform, bin string, ca []byte) (v1.Image, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	layerTar, err := rootfs(binary, ca, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: plat.Architecture,
		OS:           plat.OS,
		Created:      v1.Time{Time: o.Created},
		Config: v1.Config{
			User:       nonRootUser,
			Entrypoint: []string{"/" + binaryPath},
			WorkingDir: "/",
			Labels:     labels(o),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: o.Created},
		CreatedBy: "test/cmd/image: metrics-ring and CA certificates",
	}})
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	annotated, ok := mutate.Annotations(img, labels(o)).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotating the image: unexpected type")
	}
	return annotated, nil
}

// rootfs is the layer's tar: the binary at /, the CA bundle, and the directories above it, all owned by root so
// the nonroot user can change none of them.
func rootfs(binary, ca []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"etc/", "etc/ssl/", "etc/ssl/certs/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime}); err != nil {
			return nil, fmt.Errorf("writing the layer: %w", err)
		}
	}
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{caCertsPath, 0o644, ca}, {binaryPath, 0o755, binary}} {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing the layer: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("writing the layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("writing the layer: %w", err)
	}
	return buf.Bytes(), nil
}
