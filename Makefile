# Remedy: `make help` lists the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

include hack/tools/versions.env
export GOTOOLCHAIN := local
TOOLS_CACHE ?= $(or $(REMEDY_TOOLS_CACHE),$(HOME)/.cache/remedy/tools)
# install.sh and remedy-dev find the cache by this name.
export REMEDY_TOOLS_CACHE := $(TOOLS_CACHE)
KUBEBUILDER_ASSETS ?= $(TOOLS_CACHE)/kubernetes-$(KUBERNETES_VERSION)-$(KUBERNETES_BUILD)
TEMPORAL_CLI ?= $(TOOLS_CACHE)/temporal-$(TEMPORAL_CLI_VERSION)/temporal
CONTROLLER_GEN ?= $(TOOLS_CACHE)/controller-gen-$(CONTROLLER_GEN_VERSION)/controller-gen
WORKFLOWCHECK ?= $(TOOLS_CACHE)/workflowcheck-$(WORKFLOWCHECK_VERSION)/workflowcheck
PROMETHEUS ?= $(TOOLS_CACHE)/prometheus-$(PROMETHEUS_VERSION)-$(PROMETHEUS_BUILD)/prometheus
PROMTOOL ?= $(TOOLS_CACHE)/prometheus-$(PROMETHEUS_VERSION)-$(PROMETHEUS_BUILD)/promtool
KUBE_STATE_METRICS ?= $(TOOLS_CACHE)/kube-state-metrics-$(KUBE_STATE_METRICS_VERSION)/kube-state-metrics
export KUBEBUILDER_ASSETS TEMPORAL_CLI PROMETHEUS PROMTOOL KUBE_STATE_METRICS
GO_TEST_FLAGS ?=
# The version is the VERSION file, embedded in every build; the revision is
# stamped by -ldflags, since GOFLAGS=-buildvcs=false (or a tree without .git)
# leaves the go command's own record empty.
REVISION ?= $(shell if rev=$$(git rev-parse HEAD 2>/dev/null); then git diff --quiet HEAD || rev=$$rev-dirty; echo $$rev; else echo unknown; fi)
LDFLAGS := -X github.com/remedy-dev/remedy/internal/release.stamped=$(REVISION)
# DIST: where `make release` writes.
DIST ?= dist
BENCHTIME ?= 30x
# Benchmarks that each do minutes of work per iteration (hundreds of runs, 100 MiB of
# ConfigMaps): run once, whatever BENCHTIME says.
HEAVY_BENCH ?= ConcurrentExecutions|IdleCPUOpenRuns|OperatorHeapLargeConfigMaps|HappyPathHistory
FUZZTIME ?= 5s
# WORKER_STOP_TIMEOUT: how long `make dev`'s worker lets in-flight activities finish on Ctrl-C.
WORKER_STOP_TIMEOUT ?= 20s
# STATE_DIR: where `make dev` keeps etcd, certificates and Temporal across restarts (default: nowhere).
STATE_DIR ?=
# NODE=1 (default): `make dev` runs a real node (containerd, kube-scheduler, kubelet; Linux and
# root), so the demo workloads' Pods run. NODE=0 starts without one: Deployments never get Pods.
NODE ?= 1
# ALERT_FOR: the `for:` of the standard Kubernetes alerts (deploy/monitoring/kubernetes-alerts.yaml)
# in `make dev`, instead of their real 15m/1h, so a crash-looping Pod alerts within minutes.
ALERT_FOR ?= 1m
# DEV_FLAGS: more remedy-dev flags (see `bin/remedy-dev -h`), e.g. DEV_FLAGS="--ui-port 9233".
DEV_FLAGS ?=
FUZZ_TARGETS ?= ./api/kausality/v1alpha1:FuzzParseApprovals ./api/kausality/v1alpha1:FuzzParseRejections ./api/kausality/v1alpha1:FuzzParseFreeze ./api/kausality/v1alpha1:FuzzParseSnooze ./api/kausality/v1alpha1:FuzzParseTrace

##@ Getting started

.PHONY: dev
dev: build $(if $(filter 1,$(NODE)),image) ## Run the whole platform locally (API server, controllers, a node, Temporal + Web UI, Prometheus, kube-state-metrics, Alertmanager, operator, worker); NODE=0: no node
	@hack/tools/install.sh kubernetes temporal alertmanager prometheus kube-state-metrics $(if $(filter 1,$(NODE)),node)
	./bin/remedy-dev --worker-stop-timeout $(WORKER_STOP_TIMEOUT) --alert-for $(ALERT_FOR) $(if $(STATE_DIR),--state-dir $(STATE_DIR)) $(if $(filter 1,$(NODE)),--node) $(DEV_FLAGS)

.PHONY: test
# -timeout: the release test (hack/release) cross-compiles three platforms, minutes on a cold cache.
test: tools lint fuzz ## Run lint, the fuzz targets and every test against the real API server and Temporal dev server (not the fault suite: make faults)
	go test $(GO_TEST_FLAGS) -count=1 -timeout 30m $$(go list ./... | grep -v '/test/faults$$')

.PHONY: test-unit
# Every package but the integration suites under test/ (each starts real parts in its TestMain),
# chosen by path, so packages moved or added are picked up; -short skips the few tests elsewhere
# that build a binary or start a real part (testing.Short()). No lint, no fuzz, no API server.
test-unit: ## The fast loop, a minute or two: unit, Temporal testsuite and replay tests (not test/..., nothing that builds a binary or starts a real part)
	go test $(GO_TEST_FLAGS) -short -count=1 $$(go list ./... | grep -v '/test/')

.PHONY: faults
faults: tools ## Kill the real operator, worker, webhook, Temporal and kube-apiserver at each point; print the fault matrix
	go test $(GO_TEST_FLAGS) -count=1 -timeout 40m -skip TestUpgrade ./test/faults/
	@# The upgrade test in a process of its own: fresh parts, no Services left routed to the matrix's processes.
	go test $(GO_TEST_FLAGS) -count=1 -timeout 20m -run TestUpgrade ./test/faults/

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: tools
tools: ## Build or reuse the pinned binaries in $(TOOLS_CACHE)
	@hack/tools/install.sh

.PHONY: generate
generate: ## Generate deepcopy code
	@hack/tools/install.sh controller-gen >/dev/null
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: ## Generate CRDs, operator/worker RBAC, per-action RBAC and the Helm chart (from deploy/)
	@hack/tools/install.sh controller-gen >/dev/null
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=deploy/crd
	$(CONTROLLER_GEN) rbac:roleName=remedy-operator paths=./operator/... output:rbac:artifacts:config=deploy/rbac/operator
	$(CONTROLLER_GEN) rbac:roleName=remedy-worker paths=./activities/... output:rbac:artifacts:config=deploy/rbac/worker
	$(CONTROLLER_GEN) rbac:roleName=remedy-webhook paths=./webhook/... output:rbac:artifacts:config=deploy/rbac/webhook
	go run ./hack/genactions deploy/actions
	go run ./hack/genchart deploy/helm/remedy

.PHONY: fmt
fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet
	go vet ./...

.PHONY: lint
lint: ## gofmt check, go vet and workflowcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	$(WORKFLOWCHECK) ./workflows/...

# Go 1.26's fuzz coordinator can end a clean run with "context deadline
# exceeded" under CPU load (go.dev/issue/75804, fixed in Go 1.27): a failure
# counts only when it wrote a failing input, which every real crash does.
.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 5s), one at a time
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
	  out=$$(go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1); rc=$$?; \
	  if [ $$rc -ne 0 ]; then \
	    if ! grep -q 'Failing input written' <<<"$$out" && grep -qx '    context deadline exceeded' <<<"$$out"; then \
	      echo "  $$fn: no failing input; ignoring Go's fuzz deadline race (go.dev/issue/75804)"; \
	    else echo "$$out"; exit 1; fi; \
	  fi; \
	done

.PHONY: build
build: ## Build bin/remedy, the product, and bin/remedy-dev, the local platform of `make dev` (their version is VERSION's, their revision REVISION's)
	go build -ldflags "$(LDFLAGS)" -o bin/remedy ./cmd/remedy
	go build -ldflags "$(LDFLAGS)" -o bin/remedy-dev ./cmd/remedy-dev

.PHONY: image
image: ## Build the OCI image (static binary, CA roots, user 65532, no shell) into bin/remedy-image.tar, and the node's pause image into bin/pause-image.tar, no Docker needed
	go run ./hack/image -revision $(REVISION) -o bin/remedy-image.tar -pause-o bin/pause-image.tar

.PHONY: release
release: ## Write a release into $(DIST) (default dist/): the image tarball, the install manifest with the image pinned by digest, the CRDs, kubectl-remedy for linux/amd64, linux/arm64 and darwin/arm64 with its Krew manifest, SHA256SUMS
	go run ./hack/release -revision $(REVISION) -o $(DIST)

.PHONY: bench
bench: tools ## Run the benchmarks and print a results table with ratios to the baseline
	go test -count=1 -timeout 60m -run '^$$' -bench . -skip '$(HEAVY_BENCH)' -benchtime $(BENCHTIME) ./test/integration/ | tee bench.out
	go test -count=1 -timeout 60m -run '^$$' -bench '$(HEAVY_BENCH)' -benchtime 1x ./test/integration/ | tee -a bench.out
	go test -count=1 -run '^$$' -bench . ./activities/gate/ | tee -a bench.out
	go test -count=1 -run '^$$' -bench . ./internal/seal/ | tee -a bench.out
	go test -count=1 -run '^$$' -bench . ./webhook/kausality/ | tee -a bench.out
	go test -count=1 -run '^$$' -bench . -benchtime 1x ./test/drift/ | tee -a bench.out
	go test -count=1 -timeout 30m -run '^$$' -bench . -benchtime 1x ./test/alerts/ | tee -a bench.out
	@# The node's cost (a node: root, and the machine's node lock), each figure measured once.
	go test -count=1 -timeout 40m -run '^$$' -bench . -benchtime 1x ./test/node/ | tee -a bench.out
	go test -count=1 -timeout 30m -run '^$$' -bench . -benchtime 1x ./test/monitoring/ | tee -a bench.out
	@hack/benchtable.sh bench.out
