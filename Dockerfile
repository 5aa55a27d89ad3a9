# syntax=docker/dockerfile:1
# A static metrics-ring binary on distroless: no shell, no package manager, non-root.
#   make image   (docker build --build-arg VERSION=... --build-arg COMMIT=... -t metrics-ring:VERSION .)
# Without a working engine `make image` builds the same image from Go instead (test/cmd/image).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/metrics-ring/metrics-ring/pkg/version.Version=${VERSION} -X github.com/metrics-ring/metrics-ring/pkg/version.Commit=${COMMIT}" \
      -o /out/metrics-ring ./cmd/metrics-ring

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.version="${VERSION}" org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/metrics-ring/metrics-ring"
COPY --from=build /out/metrics-ring /metrics-ring
USER 65532:65532
ENTRYPOINT ["/metrics-ring"]
