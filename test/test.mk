# End-to-end targets, included by the top-level Makefile (-include test/test.mk).
# The control-plane tools (etcd, kube-apiserver, kube-controller-manager, kubectl) are built from the pinned
# modules in test/go.mod into $(METRICS_RING_CACHE), keyed by version, the first time only; metrics-ring is
# rebuilt from this repository every time (incrementally). The real node packages (e2e/realnode, e2e/realinstall)
# build the kubelet, kube-scheduler and metrics-server v0.9.0 (its server and its end-to-end suite) the same way on
# first use, and metrics-ring's image (`make image-archive`, linux/amd64) into their run's folder every run.

METRICS_RING_TEST_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
METRICS_RING_CACHE ?= $(HOME)/.cache/metrics-ring
GO ?= go
# Packages of the test module run one at a time: each starts its own control plane.
E2E_PKGS ?= ./...
E2E_TIMEOUT ?= 45m
E2E_FLAGS ?=
DEMO_FLAGS ?=
# The pinned kubectl, built on first use (recursively expanded: only targets that use it pay for it).
KUBECTL ?= $(shell cd $(METRICS_RING_TEST_DIR) && $(GO) run ./cmd/tools -control-plane-only -print=kubectl)
export METRICS_RING_CACHE

.PHONY: tools demo test-e2e

tools: ## build the end-to-end tools into $(METRICS_RING_CACHE) (first time: a few minutes) and metrics-ring
	cd $(METRICS_RING_TEST_DIR) && $(GO) run ./cmd/tools

demo: ## a local cluster (5 simulated nodes, 40 pods) with metrics-ring behind the aggregator, until Ctrl-C
	cd $(METRICS_RING_TEST_DIR) && $(GO) run ./cmd/demo $(DEMO_FLAGS)

test-e2e: tools ## end-to-end tests against a real kube-apiserver, kubectl and HPA controller
	cd $(METRICS_RING_TEST_DIR) && $(GO) test -count=1 -p=1 -timeout=$(E2E_TIMEOUT) $(E2E_FLAGS) $(E2E_PKGS)

# The scale and load benchmarks (issues 6, 7 and 14) run on their own, never in `make test`. BENCH_FLAGS adds
# flags, e.g. BENCH_FLAGS="-nodes 100 -metrics-server v0.9.0" (that also runs upstream metrics-server on the same
# cluster, for ratios) or BENCH_FLAGS="-baseline-binary /tmp/metrics-ring-old" (another metrics-ring build, e.g.
# the previous code's, after this one on the same cluster); `cd test && go run ./cmd/bench-scale -h` lists them.
BENCH_FLAGS ?=

# The soak (issue 29): SOAK_DURATION per server at SOAK_NODES x 30 pods, 10 pods replaced a second, 2,000 HPAs
# synced by kube-controller-manager, metrics-ring then metrics-server; the plot goes to SOAK_PLOT.
SOAK_DURATION ?= 1h
SOAK_NODES ?= 1000
SOAK_PLOT ?= $(or $(TMPDIR),/tmp)/metrics-ring-soak.svg
SOAK_FLAGS ?=

.PHONY: bench-scale bench-load bench-soak
bench-scale: ## scale benchmark: 1,000 simulated nodes x 30 pods behind the aggregator; prints CPU, memory, latency, freshness (not in make test)
	cd $(METRICS_RING_TEST_DIR) && $(GO) run ./cmd/bench-scale $(BENCH_FLAGS)

bench-load: ## load benchmark at 1,000 simulated nodes: 100 watchers + 20 pagers of all pods for 60 s, then 200 clients listing them for 60 s; events, errors, collection interval, RSS (not in make test)
	cd $(METRICS_RING_TEST_DIR) && $(GO) run ./cmd/bench-scale -scale=false -readers -load $(BENCH_FLAGS)

bench-soak: ## soak: SOAK_DURATION (1h) per server at SOAK_NODES (1,000) x 30 pods with churn, 2,000 HPAs through kube-controller-manager and kubectl top each minute, metrics-ring then metrics-server v0.9.0; RSS and heap plot in SOAK_PLOT (not in make test)
	cd $(METRICS_RING_TEST_DIR) && $(GO) run ./cmd/bench-scale -scale=false -soak=$(SOAK_DURATION) -nodes=$(SOAK_NODES) \
		-churn-per-sec=10 -hpa=2000 -metrics-server=v0.9.0 -soak-plot=$(SOAK_PLOT) $(SOAK_FLAGS)
