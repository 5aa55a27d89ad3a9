package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageNames is how the archive names its image for each loader: containerd (docker 25+ with the containerd store)
// and podman read index.json's annotations; docker's classic store reads manifest.json's RepoTags.
type imageNames struct {
	full     string // docker.io/library/metrics-ring:v1 (io.containerd.image.name)
	tag      string // v1 (org.opencontainers.image.ref.name, as docker save writes it)
	familiar string // metrics-ring:v1 (RepoTags)
}

func parseImageName(s string) (imageNames, error) {
	t, err := name.NewTag(s)
	if err != nil {
		return imageNames{}, fmt.Errorf("image name %q (want name:tag): %w", s, err)
	}
	if !strings.HasSuffix(s, ":"+t.TagStr()) {
		return imageNames{}, fmt.Errorf("image name %q has no tag (want name:tag)", s)
	}
	reg := t.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io" // go-containerregistry says index.docker.io; docker and containerd say docker.io
	}
	return imageNames{full: reg + "/" + t.RepositoryStr() + ":" + t.TagStr(), tag: t.TagStr(), familiar: s}, nil
}

// writeArchiveFile writes an OCI image layout as a tar, the way `docker save` does since Docker 25: oci-layout,
// blobs/sha256/..., index.json pointing at the multi-platform index, and manifest.json naming the host's image for
// loaders that predate OCI layouts.
func writeArchiveFile(file string, idx v1.ImageIndex, host v1.Image, names imageNames, mtime time.Time) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("creating %s: %w", file, err)
	}
	aw := &archiveWriter{tw: tar.NewWriter(f), mtime: mtime, written: map[v1.Hash]bool{}}
	err = aw.write(idx, host, names)
	if cerr := aw.tw.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("writing %s: %w", file, cerr)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("writing %s: %w", file, cerr)
	}
	return err
}

type archiveWriter struct {
	tw      *tar.Writer
	mtime   time.Time
	written map[v1.Hash]bool
}

func (aw *archiveWriter) write(idx v1.ImageIndex, host v1.Image, names imageNames) error {
	if err := aw.file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	manifests, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("reading the index: %w", err)
	}
	for _, m := range manifests.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			return fmt.Errorf("image %s: %w", m.Digest, err)
		}
		if err := aw.image(img); err != nil {
			return err
		}
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return fmt.Errorf("encoding the index: %w", err)
	}
	desc, err := aw.blob(raw)
	if err != nil {
		return err
	}
	desc.MediaType = types.OCIImageIndex
	desc.Annotations = map[string]string{"io.containerd.image.name": names.full, "org.opencontainers.image.ref.name": names.tag}
	if err := aw.json("index.json", v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{desc}}); err != nil {
		return err
	}

	cfg, err := host.ConfigName()
	if err != nil {
		return fmt.Errorf("host image config: %w", err)
	}
	layers, err := host.Layers()
	if err != nil {
		return fmt.Errorf("host image layers: %w", err)
	}
	legacy := tarball.Descriptor{Config: blobPath(cfg), RepoTags: []string{names.familiar}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("host image layer: %w", err)
		}
		legacy.Layers = append(legacy.Layers, blobPath(d))
	}
	return aw.json("manifest.json", tarball.Manifest{legacy})
}

// image writes one image's layers, config and manifest as blobs.
func (aw *archiveWriter) image(img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("layer digest: %w", err)
		}
		size, err := l.Size()
		if err != nil {
			return fmt.Errorf("layer size: %w", err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("layer %s: %w", d, err)
		}
		err = aw.stream(blobPath(d), d, size, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	for _, get := range []func() ([]byte, error){img.RawConfigFile, img.RawManifest} {
		raw, err := get()
		if err != nil {
			return fmt.Errorf("encoding the image: %w", err)
		}
		if _, err := aw.blob(raw); err != nil {
			return err
		}
	}
	return nil
}

func (aw *archiveWriter) blob(raw []byte) (v1.Descriptor, error) {
	h, size, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("hashing: %w", err)
	}
	return v1.Descriptor{Digest: h, Size: size}, aw.stream(blobPath(h), h, size, bytes.NewReader(raw))
}

func (aw *archiveWriter) stream(name string, h v1.Hash, size int64, r io.Reader) error {
	if aw.written[h] {
		return nil
	}
	aw.written[h] = true
	if err := aw.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: aw.mtime}); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if _, err := io.Copy(aw.tw, r); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

func (aw *archiveWriter) json(name string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	return aw.file(name, raw)
}

func (aw *archiveWriter) file(name string, raw []byte) error {
	if err := aw.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(raw)), ModTime: aw.mtime}); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	_, err := aw.tw.Write(raw)
	return err
}

func blobPath(h v1.Hash) string { return path.Join("blobs", h.Algorithm, h.Hex) }
