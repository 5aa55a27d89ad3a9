// Command image builds the metrics-ring container image without a container engine: it cross-compiles the static
// binary for each platform and writes an OCI image layout archive (index.json, plus a Docker manifest.json for the
// build host's platform) that `docker load` and `podman load` both take. `make image` runs it when `docker info`
// fails; with a working engine the Dockerfile is used instead. The image holds the binary, the CA certificates and
// nothing else: no shell, no /etc/passwd, user 65532:65532.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

func main() {
	var o options
	var platforms string
	var epoch int64
	flag.StringVar(&o.Src, "src", "..", "root of the metrics-ring main module")
	flag.StringVar(&o.Out, "o", "../bin/metrics-ring-image.tar", "archive to write")
	flag.StringVar(&o.Image, "image", "metrics-ring:dev", "name:tag the archive carries (docker load / podman load tag it so)")
	flag.StringVar(&o.Version, "version", "dev", "version, for the org.opencontainers.image.version label")
	flag.StringVar(&o.Revision, "revision", "unknown", "source commit, for the org.opencontainers.image.revision label")
	flag.StringVar(&o.Source, "source", "https://github.com/metrics-ring/metrics-ring", "org.opencontainers.image.source label")
	flag.StringVar(&o.LDFlags, "ldflags", "-s -w", "go build -ldflags (the Makefile passes its LDFLAGS, version included)")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list; more than one makes an OCI index")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle copied to /etc/ssl/certs/ca-certificates.crt")
	flag.Int64Var(&epoch, "source-date-epoch", 0, "creation time of the image and its files, Unix seconds (the Makefile passes the commit's time)")
	flag.Parse()

	o.Created = time.Unix(epoch, 0).UTC()
	for _, p := range strings.Split(platforms, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.Platforms = append(o.Platforms, p)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := build(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}
