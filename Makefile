# metrics-ring. `make demo` and `make test` do all set-up on a fresh machine: they need only Go; the end-to-end
# tools (etcd, kube-apiserver, kube-controller-manager, kubectl) are built from pinned modules on first use.
SHELL := /usr/bin/env bash -o pipefail

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/metrics-ring/metrics-ring/pkg/version.Version=$(VERSION) \
           -X github.com/metrics-ring/metrics-ring/pkg/version.Commit=$(COMMIT)
GO      ?= go
BIN     := bin

.PHONY: all build test unit verify generate verify-generate bench fuzz image manifests clean help
all: build

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

build: ## build bin/metrics-ring
	@echo ">> building $(BIN)/metrics-ring $(VERSION)"
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/metrics-ring ./cmd/metrics-ring

test: verify unit test-e2e ## every test: static checks, unit and component tests, end to end

unit: ## unit and component tests of the main module (race detector on)
	@echo ">> unit and component tests"
	$(GO) test -race -count=1 ./...

verify: ## gofmt, go vet, go mod tidy (both modules)
	@echo ">> gofmt, go vet, go mod tidy"
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>&1); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	@$(GO) mod tidy && \
	  if ! git diff --quiet -- go.mod go.sum; then git diff -- go.mod go.sum | head -40; echo "go mod tidy changed go.mod/go.sum"; exit 1; fi
	@cd test && $(GO) vet ./... && $(GO) mod tidy && \
	  if ! git diff --quiet -- go.mod go.sum; then echo "go mod tidy changed test/go.mod"; exit 1; fi

generate: ## regenerate the checked-in OpenAPI definitions (a test fails when they are stale)
	hack/update-openapi.sh

verify-generate: ## check the OpenAPI definitions are current
	hack/verify-openapi.sh

bench: ## micro-benchmarks (parser, storage, list encoding) with allocations
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

FUZZTIME ?= 30s
fuzz: ## run every fuzz target for FUZZTIME each
	@for pkg in $$($(GO) list ./pkg/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo ">> fuzz $$pkg $$f ($(FUZZTIME))"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; done

IMAGE ?= metrics-ring:$(VERSION)
image: ## build the container image (needs a Docker engine)
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

manifests: ## render the single-file release YAMLs from the kustomize overlays into _output/
	@mkdir -p _output
	@for o in kubelet prometheus high-availability; do \
	  echo ">> _output/metrics-ring-$$o.yaml"; $(KUBECTL) kustomize manifests/overlays/$$o > _output/metrics-ring-$$o.yaml; done

clean: ## remove build output
	rm -rf $(BIN)

# The end-to-end suite, the demo and the scale benchmark live in the nested test/ module.
-include test/test.mk
