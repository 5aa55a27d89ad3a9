package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestArchive builds the image for this machine's architecture the way `make image` does without a container
// engine, then opens the archive as both loaders would (index.json and manifest.json) and checks what a user of the
// image depends on: the user, the entrypoint, the files, no shell, and the binary answering --version.
func TestArchive(t *testing.T) {
	const version, commit = "v0.0.0-imagetest", "abc1234"
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "image.tar")
	var log bytes.Buffer
	err = build(context.Background(), options{
		Src: root, Out: out, Image: "example.test/metrics-ring:" + version,
		Version: version, Revision: commit, Source: "https://example.test/metrics-ring",
		LDFlags: "-s -w -X github.com/metrics-ring/metrics-ring/pkg/version.Version=" + version +
			" -X github.com/metrics-ring/metrics-ring/pkg/version.Commit=" + commit,
		CACerts: "/etc/ssl/certs/ca-certificates.crt", Platforms: []string{"linux/" + runtime.GOARCH},
		Created: time.Unix(1700000000, 0).UTC(),
	}, &log)
	if err != nil {
		t.Fatalf("build: %v\n%s", err, log.String())
	}

	dir := t.TempDir()
	untar(t, out, dir)
	img := imageFromLayout(t, dir, "example.test/metrics-ring:"+version, version)

	// Docker's classic store loads manifest.json: it must name the same image.
	legacy, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatalf("reading manifest.json as docker load does: %v", err)
	}
	if got, want := digestOf(t, legacy.ConfigName), digestOf(t, img.ConfigName); got != want {
		t.Errorf("manifest.json config %s, index.json's image config %s", got, want)
	}

	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	if got := strings.Join(cfg.Config.Entrypoint, " "); got != "/metrics-ring" || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want /metrics-ring and no cmd", got, cfg.Config.Cmd)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": commit,
		"org.opencontainers.image.source":   "https://example.test/metrics-ring",
	} {
		if got := cfg.Config.Labels[k]; got != want {
			t.Errorf("label %s=%q, want %q", k, got, want)
		}
	}

	files := layerFiles(t, img)
	want := map[string]string{"etc/": "d", "etc/ssl/": "d", "etc/ssl/certs/": "d",
		"etc/ssl/certs/ca-certificates.crt": "f", "metrics-ring": "f"}
	for name, kind := range want {
		if f, ok := files[name]; !ok || f.kind != kind {
			t.Errorf("%s: missing or of the wrong type (%+v)", name, f)
		}
	}
	for name := range files {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected file in the image: %s", name)
		}
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh", "usr/bin/bash", "bin/ash"} {
		if _, ok := files[shell]; ok {
			t.Errorf("the image has a shell: /%s", shell)
		}
	}
	if !x509.NewCertPool().AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"].data) {
		t.Error("etc/ssl/certs/ca-certificates.crt holds no PEM certificate")
	}
	bin := files["metrics-ring"]
	if bin.mode&0o111 == 0 || bin.uid != 0 || bin.mode&0o022 != 0 {
		t.Errorf("metrics-ring mode %o uid %d: want executable, owned by root, writable by no one else", bin.mode, bin.uid)
	}

	exe := filepath.Join(t.TempDir(), "metrics-ring")
	if err := os.WriteFile(exe, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(exe, "--version").CombinedOutput()
	if want := "metrics-ring " + version + " (commit " + commit + ")"; err != nil || strings.TrimSpace(string(got)) != want {
		t.Errorf("the binary from the layer: --version = %q (%v), want %q", got, err, want)
	}
}

// imageFromLayout reads the OCI layout as containerd and podman do: index.json names one index, which holds one
// image per platform.
func imageFromLayout(t *testing.T, dir, fullName, tag string) v1.Image {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	im, err := top.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d entries, want 1", err, len(im.Manifests))
	}
	d := im.Manifests[0]
	if d.Annotations["io.containerd.image.name"] != "example.test/metrics-ring:"+tag ||
		d.Annotations["org.opencontainers.image.ref.name"] != tag {
		t.Errorf("index.json names the image %v, want %s", d.Annotations, fullName)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatalf("the image index: %v", err)
	}
	platforms, err := idx.IndexManifest()
	if err != nil || len(platforms.Manifests) != 1 || platforms.Manifests[0].Platform == nil ||
		platforms.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Fatalf("the image index: %v, %+v, want one image for %s", err, platforms, runtime.GOARCH)
	}
	img, err := idx.Image(platforms.Manifests[0].Digest)
	if err != nil {
		t.Fatalf("the image: %v", err)
	}
	return img
}

type file struct {
	kind string // "d" or "f"; anything else is named by its tar type flag
	mode int64
	uid  int
	data []byte
}

func layerFiles(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]file{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("reading a layer: %v", err)
			}
			f := file{kind: string(hdr.Typeflag), mode: hdr.Mode, uid: hdr.Uid}
			switch hdr.Typeflag {
			case tar.TypeDir:
				f.kind = "d"
			case tar.TypeReg:
				f.kind = "f"
				if f.data, err = io.ReadAll(tr); err != nil {
					t.Fatalf("reading %s: %v", hdr.Name, err)
				}
			}
			files[strings.TrimPrefix(hdr.Name, "./")] = f
		}
		rc.Close()
	}
	return files
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("reading the archive: %v", err)
		}
		if !filepath.IsLocal(hdr.Name) || hdr.Typeflag != tar.TypeReg {
			t.Fatalf("archive entry %q (type %c): want regular files at local paths", hdr.Name, hdr.Typeflag)
		}
		dst := filepath.Join(dir, hdr.Name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func digestOf(t *testing.T, f func() (v1.Hash, error)) v1.Hash {
	t.Helper()
	h, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
