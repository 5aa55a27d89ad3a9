# metrics-ring. `make demo` and `make test` do all set-up on a fresh machine: they need only Go; the end-to-end
# tools (etcd, kube-apiserver, kube-controller-manager, kubectl) are built from pinned modules on first use.
SHELL := /usr/bin/env bash -o pipefail

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/metrics-ring/metrics-ring/pkg/version.Version=$(VERSION) \
           -X github.com/metrics-ring/metrics-ring/pkg/version.Commit=$(COMMIT)
GO      ?= go
BIN     := bin

.PHONY: all build test unit verify lint generate verify-generate bench fuzz image image-archive manifests clean help
all: build

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

build: ## build bin/metrics-ring
	@echo ">> building $(BIN)/metrics-ring $(VERSION)"
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/metrics-ring ./cmd/metrics-ring

test: verify unit fuzz test-e2e ## every test: static checks, unit and component tests, bounded fuzzing, end to end

unit: ## unit and component tests of the main module (race detector on)
	@echo ">> unit and component tests"
	$(GO) test -race -count=1 ./...

# staticcheck, pinned (its default checks, with unused). `go run pkg@version` builds it once into the Go build
# cache; its analysis of every dependency is kept in its own cache (STATICCHECK_CACHE, default
# ~/.cache/staticcheck), so a run after the first re-checks only the packages that changed.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

verify: ## gofmt, go vet, go mod tidy, staticcheck (both modules)
	@echo ">> gofmt, go vet, go mod tidy"
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>&1); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	@$(GO) mod tidy && \
	  if ! git diff --quiet -- go.mod go.sum; then git diff -- go.mod go.sum | head -40; echo "go mod tidy changed go.mod/go.sum"; exit 1; fi
	@cd test && $(GO) vet ./... && $(GO) mod tidy && \
	  if ! git diff --quiet -- go.mod go.sum; then echo "go mod tidy changed test/go.mod"; exit 1; fi
	@$(MAKE) --no-print-directory lint

lint: ## staticcheck (pinned, STATICCHECK_VERSION) on both modules
	@echo ">> staticcheck $(STATICCHECK_VERSION)"
	$(STATICCHECK) ./...
	cd test && $(STATICCHECK) ./...

generate: ## regenerate the checked-in OpenAPI definitions (a test fails when they are stale)
	hack/update-openapi.sh

verify-generate: ## check the OpenAPI definitions are current
	hack/verify-openapi.sh

bench: ## micro-benchmarks (parser, storage, list encoding, the pod informer under churn) with allocations
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/... ./cmd/...

# Each fuzz target runs for FUZZTIME from its checked-in corpus (testdata/fuzz/<target>); a failing input is saved
# there too, to become a regression test.
FUZZTIME ?= 30s
fuzz: ## run every fuzz target for FUZZTIME each (30s)
	@for pkg in $$($(GO) list ./pkg/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo ">> fuzz $$pkg $$f ($(FUZZTIME))"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; done

# `make image` uses the Dockerfile when `docker info` succeeds (a CLI without a daemon does not count); otherwise it
# builds the same image from Go (test/cmd/image) as an OCI archive that `docker load` and `podman load` take.
IMAGE ?= metrics-ring:$(VERSION)
IMAGE_ARCHIVE ?= $(BIN)/metrics-ring-image.tar
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
CONTAINER_ENGINE ?= docker
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
image: ## build the container image: with a working Docker engine from the Dockerfile, else as an OCI archive (image-archive)
	@if $(CONTAINER_ENGINE) info >/dev/null 2>&1; then \
	  echo ">> $(CONTAINER_ENGINE) build -t $(IMAGE) . (the Dockerfile)"; \
	  $(CONTAINER_ENGINE) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .; \
	else \
	  echo ">> no working container engine ('$(CONTAINER_ENGINE) info' failed): building $(IMAGE_ARCHIVE) from Go instead"; \
	  $(MAKE) --no-print-directory image-archive; \
	fi

image-archive: ## build the image without a container engine: an OCI archive bin/metrics-ring-image.tar for IMAGE_PLATFORMS (docker/podman load -i)
	cd test && $(GO) run ./cmd/image -src $(CURDIR) -o $(abspath $(IMAGE_ARCHIVE)) -image $(IMAGE) \
	  -version $(VERSION) -revision $(COMMIT) -ldflags '$(LDFLAGS)' -platforms $(IMAGE_PLATFORMS) \
	  -source-date-epoch $(SOURCE_DATE_EPOCH)

manifests: ## render the checked-in single-file release YAMLs manifests/release/metrics-ring-<overlay>.yaml (a test keeps them in sync)
	@mkdir -p manifests/release
	@for d in manifests/overlays/*/; do o=$$(basename $$d); f=manifests/release/metrics-ring-$$o.yaml; \
	  echo ">> $$f"; \
	  { echo "# Code generated by \`make manifests\` from manifests/overlays/$$o; DO NOT EDIT."; \
	    echo "# Install: kubectl apply -f $$f"; \
	    $(KUBECTL) kustomize $$d; } > $$f.tmp && mv $$f.tmp $$f || { rm -f $$f.tmp; exit 1; }; done

clean: ## remove build output
	rm -rf $(BIN)

# The end-to-end suite, the demo and the scale benchmark live in the nested test/ module.
-include test/test.mk
