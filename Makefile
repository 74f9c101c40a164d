# metactl's build and test entry points. Run `make help` for the list.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO            ?= go
CONTROLLER_GEN = $(GO) tool -modfile=hack/tools/go.mod controller-gen
BIN           := bin
TEST_TIMEOUT  ?= 20m
# Packages to test; override to narrow, e.g. make test PKG=./pkg/hooks/...
PKG           ?= ./...

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# What `metactl version` prints: the nearest tag (or commit) and the commit,
# from git when building in a checkout.
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT        ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS       := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: build
build: ## Build bin/metactl and bin/metactl-dev (what `metactl dev` runs).
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/metactl ./cmd/metactl-dev

.PHONY: demo
demo: build ## Run a local control plane with metactl and the hello-world example (Ctrl-C stops it).
	$(BIN)/metactl dev --example hello-world

.PHONY: testenv
testenv: ## Build etcd, kube-apiserver, kube-controller-manager, kubectl (and kube-scheduler, kwok for metactl dev) once (cached outside the repo).
	@hack/testenv.sh >/dev/null

# Only make test needs them (test/manifests): bench and soak do not pay for
# them on a cold machine.
.PHONY: helm-tools
helm-tools: ## Build helm and the PromQL checker, and fetch the Prometheus Operator CRDs, that test/manifests uses, once (cached outside the repo).
	@hack/helm.sh >/dev/null
	@hack/promql.sh >/dev/null
	@hack/prometheus-operator-crds.sh >/dev/null

# -count=1: every test runs every time. The process-level tests (test/e2e,
# test/operations, test/manifests) run metactl, the example hooks and the
# manifests as other processes, whose files are not part of Go's test cache
# key: a cached pass could hide code that now fails.
# -tags integration: the tests of pkg/ and internal/ that need a control
# plane (and the TestMain that starts it) are in files built only with
# this tag, so that plain go test ./pkg/... ./internal/... runs the rest in
# seconds without one (make test-fast).
.PHONY: test
test: testenv helm-tools ## Run unit and integration tests against a real control plane, with the race detector, never from Go's test cache.
	@status=0; \
	KUBEBUILDER_ASSETS="$$(hack/testenv.sh)" $(GO) test -tags integration -race -count=1 -timeout $(TEST_TIMEOUT) $(PKG) || status=$$?; \
	hack/cleanup-testenv.sh; \
	exit $$status

.PHONY: test-fast
test-fast: ## Run the tests of pkg/ and internal/ that need no control plane (no -tags integration), with the race detector; seconds, nothing to build first.
	$(GO) test -race -count=1 ./pkg/... ./internal/...

.PHONY: replay-examples
replay-examples: build ## Replay each example's recorded hook calls (examples/*/*/recorded) against its hook, as a hook author does in CI (make test runs it too).
	hack/replay-examples.sh

.PHONY: bench
bench: build testenv ## Benchmark against the API server's limit: N=1000, and N=1000 with a 100 ms hook, 3 rounds each (about 15 min; docs/performance.md; make bench-scale for N up to 10000). Fails if any run fails a target.
	@status=0; export KUBEBUILDER_ASSETS="$$(hack/testenv.sh)"; \
	$(GO) build -o $(BIN)/bench ./test/bench || status=2; \
	for args in "-n 1000 -svg docs/bench-n1000.svg" "-n 1000 -slow-hook-ms 100 -svg docs/bench-n1000-slow100ms.svg"; do \
		[ $$status = 0 ] || [ $$status = 1 ] || break; \
		$(BIN)/bench -metactl $(BIN)/metactl $$args $(BENCH_FLAGS); rc=$$?; \
		[ $$rc = 0 ] || status=$$rc; \
	done; \
	hack/cleanup-testenv.sh; \
	exit $$status

.PHONY: bench-scale
bench-scale: build testenv ## Benchmark N=1000, 2500, 5000 and 10000 parents, one round each, and plot metactl's CPU and memory against N into docs/bench-growth.svg (about 30 min). Fails if any run fails a target.
	@status=0; export KUBEBUILDER_ASSETS="$$(hack/testenv.sh)"; \
	$(GO) build -o $(BIN)/bench ./test/bench || status=2; \
	for n in 1000 2500 5000 10000; do \
		[ $$status = 0 ] || [ $$status = 1 ] || break; \
		$(BIN)/bench -metactl $(BIN)/metactl -n $$n -runs 1 -label scale-n$$n -svg docs/bench-scale-n$$n.svg $(BENCH_FLAGS); rc=$$?; \
		[ $$rc = 0 ] || status=$$rc; \
	done; \
	[ $$status = 0 ] || [ $$status = 1 ] && $(BIN)/bench -svg docs/bench-growth.svg \
		-growth-from test/bench/results/scale-n1000.json,test/bench/results/scale-n2500.json,test/bench/results/scale-n5000.json,test/bench/results/scale-n10000.json || status=2; \
	hack/cleanup-testenv.sh; \
	exit $$status

.PHONY: soak
soak: build testenv ## Run metactl for SOAK_DURATION (default 5m) under churn and hook faults; fail on growth of RSS, goroutines or fds, or on no convergence (not in CI).
	@status=0; export KUBEBUILDER_ASSETS="$$(hack/testenv.sh)"; \
	$(GO) build -o $(BIN)/soak ./test/soak && \
	$(BIN)/soak -metactl $(BIN)/metactl -duration $${SOAK_DURATION:-5m} $(SOAK_FLAGS) || status=$$?; \
	hack/cleanup-testenv.sh; \
	exit $$status

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 10m; CI runs 10s).
	FUZZTIME=$${FUZZTIME:-10m} hack/fuzz.sh

.PHONY: generate
generate: ## Generate deepcopy code and CRDs from the API types; copy the CRDs and monitoring files into charts/metactl.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/... \
		crd:crdVersions=v1 output:crd:dir=manifests/crds
	@# The Helm chart ships copies: manifests/ is the source of truth.
	rm -rf charts/metactl/crds && mkdir -p charts/metactl/crds charts/metactl/files
	cp manifests/crds/*.yaml charts/metactl/crds/
	cp manifests/monitoring/prometheusrule.yaml manifests/monitoring/dashboard.json charts/metactl/files/

.PHONY: fmt
fmt: ## gofmt, and imports in three groups: standard library, other modules, metactl's own.
	gofmt -w $$(git ls-files --cached --others --exclude-standard '*.go')
	go tool -modfile=hack/tools/go.mod gci write -s standard -s default -s 'prefix(github.com/metactl/metactl)' --skip-generated $$(git ls-files --cached --others --exclude-standard '*.go')

.PHONY: verify
verify: ## Check that generated code and CRDs are up to date, gofmt, import groups, go vet and staticcheck.
	hack/verify.sh

.PHONY: clean
clean: ## Remove build output and leaked test control planes.
	rm -rf $(BIN)
	hack/cleanup-testenv.sh
