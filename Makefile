# premigrate: `make demo` runs the demo, `make test` runs what CI runs, `make test-matrix` every test. `make help` lists the rest.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

export PREMIGRATE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/premigrate
export GOFLAGS ?= -buildvcs=false
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
CHART := charts/premigrate
DEPENDENT_CHARTS := $(CHART) examples/ledger/chart
KIND_CLUSTER_NAME ?= premigrate
export KIND_CLUSTER_NAME
GO_PKGS_UNIT := ./cmd/... ./internal/... ./examples/... ./hack/... ./test/framework/... ./test/kindcluster/... ./test/cmd/... ./test/e2e/...

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## install the pinned chart tools into ./bin (helm 3 and 4, ct, kubeconform, helm-docs, golangci-lint, yamllint, kind, kubectl)
	@hack/tools.sh

define chart_deps
@for c in $(DEPENDENT_CHARTS); do helm dependency build --skip-refresh "$$c" >/dev/null || exit 1; done
endef

.PHONY: chart-deps
chart-deps: tools ## package the library chart premigrate-lib into the charts that depend on it (helm dependency build)
	$(chart_deps)

.PHONY: images
images: tools ## build premigrate's images (gate, demo v1..v8, postgres, bench baseline) as archives, offline
	@hack/images.sh

.PHONY: node-image
node-image: ## build (or find) the kind node image, offline
	@hack/offline/kind/node-image.sh

.PHONY: cluster
cluster: chart-deps images ## create or reuse the kind cluster and load our images (idempotent)
	@node_image=$$(hack/offline/kind/node-image.sh) && go run ./test/cmd/cluster up --node-image "$$node_image"

.PHONY: test-gitops
test-gitops: tools chart-deps images gitops-images release-e2e ## only the Flux and Argo CD scenarios, every one (a -run filter: the verdict is not enforced)
	@node_image=$$(hack/offline/kind/node-image.sh) && KIND_NODE_IMAGE="$$node_image" \
	  go test -tags e2e ./test/e2e/ -count=1 -timeout 60m -parallel 256 -v -run 'TestFlux|TestArgoCD' 2>&1 | tee "$(PREMIGRATE_CACHE)/logs/gitops.log"

.PHONY: gitops-images
gitops-images: tools ## build Flux's and Argo CD's images from source, cached by version (cold about 12 min, warm 1 s)
	@hack/gitops.sh build all

.PHONY: gitops
gitops: tools ## Flux and Argo CD on the running kind cluster (hack/gitops.sh up; builds what is missing)
	@hack/gitops.sh up

.PHONY: gitops-smoke
gitops-smoke: gitops ## install the chart once through Flux and once through Argo CD, wait until healthy, remove it
	@hack/gitops.sh smoke

.PHONY: cluster-down
cluster-down: ## delete the kind cluster
	@go run ./test/cmd/cluster down

.PHONY: fmt-check
fmt-check:
	@out=$$(gofmt -l cmd internal hack test examples); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: lint
lint: tools chart-deps fmt-check ## gofmt, go vet, golangci-lint, helm lint (3 and 4), ct lint, helm-docs drift, kubeconform, yamllint
	@hack/lint.sh

.PHONY: unit-deps
unit-deps: ## install what the unit tests need beyond Go (Debian's PostgreSQL 15), once
	@hack/unit-deps.sh

.PHONY: test-unit
test-unit: unit-deps ## Go unit tests (gate, demo app and ledger against a real PostgreSQL, harness)
	go test -count=1 $(GO_PKGS_UNIT)

.PHONY: test-render
test-render: tools chart-deps ## render tests of the chart (no cluster)
	go test -count=1 ./test/render/...

.PHONY: test-fast
test-fast: lint test-unit test-render test-mutants-unit ## everything that needs no cluster

# How many scenarios run at once in the cluster tests (test/e2e/share_test.go): three on this machine's two
# cores (most of a scenario's time is waiting on the cluster), where one kept them 68% busy, two took the suite
# to 27m43s and three to 20m20s and 20m4s with every scenario passed and no request of a load failed; four held
# them at 99% and failed a load. A scenario that counts a load's failed requests takes the whole cluster. go
# test's -parallel is set to more than twice the number of scenarios (test/e2e checks it): the scheduler is the
# limit; fewer slots than waiting scenarios hang the run (67 scenarios at -parallel 64 did).
E2E_CAPACITY ?= 3
export E2E_CAPACITY

# The release the cluster tests push to a registry on kind and install from it (test/e2e/adoption_registry_test.go):
# `make release` without PostgreSQL (its arm64 packages are a download the tests do not need), in the cache
export PREMIGRATE_RELEASE_DIST := $(PREMIGRATE_CACHE)/release-e2e

.PHONY: release-e2e
release-e2e: tools
	@mkdir -p "$(PREMIGRATE_CACHE)/logs" && RELEASE_POSTGRES=0 RELEASE_DIST="$(PREMIGRATE_RELEASE_DIST)" hack/release.sh >"$(PREMIGRATE_CACHE)/logs/release-e2e.log" 2>&1 || \
	  { tail -n 30 "$(PREMIGRATE_CACHE)/logs/release-e2e.log"; exit 1; }
	@echo "release for the cluster tests: $(PREMIGRATE_RELEASE_DIST)/oci (log: $(PREMIGRATE_CACHE)/logs/release-e2e.log)"

# The cluster tests come in two tiers, declared by each scenario beside its promise (test/e2e: framework.CI or
# framework.Matrix; docs/development.md says how to choose). make test runs the CI tier: every mutant's catching
# scenario, at least one scenario per promise clause, Flux and Argo CD, the witness's controls, fewer repeated
# upgrades. make test-matrix runs every scenario at full depth. Each run's verdict is enforced on the scenarios it
# asked for (a go test -run filter instead leaves it unenforced).
E2E_CI := E2E_TIER=ci E2E_UPGRADES=4 E2E_GITOPS_UPGRADES=2
E2E_MATRIX := E2E_TIER=matrix E2E_UPGRADES= E2E_GITOPS_UPGRADES=

.PHONY: test-e2e
test-e2e: tools chart-deps images gitops-images release-e2e ## cluster tests on kind, the CI tier (creates the cluster; KEEP_CLUSTER=1 keeps it and the namespaces of failed scenarios)
	@node_image=$$(hack/offline/kind/node-image.sh) && KIND_NODE_IMAGE="$$node_image" $(E2E_CI) \
	  go test -tags e2e ./test/e2e/ -count=1 -timeout 60m -parallel 256 -v $(E2E_FLAGS) 2>&1 | tee "$(PREMIGRATE_CACHE)/logs/e2e.log"

.PHONY: test-e2e-matrix
test-e2e-matrix: tools chart-deps images gitops-images release-e2e ## cluster tests on kind, every scenario of the matrix at full depth; its table goes to docs/matrix.md (commit it)
	@node_image=$$(hack/offline/kind/node-image.sh) && rc=0 && { KIND_NODE_IMAGE="$$node_image" $(E2E_MATRIX) \
	  go test -tags e2e ./test/e2e/ -count=1 -timeout 100m -parallel 256 -v $(E2E_FLAGS) 2>&1 | tee "$(PREMIGRATE_CACHE)/logs/e2e-matrix.log"; } || rc=$$?; \
	  if [ -z "$(E2E_FLAGS)" ] && [ -f results/e2e-report.md ]; then cp results/e2e-report.md docs/matrix.md && echo "the matrix's table: docs/matrix.md"; fi; exit $$rc

.PHONY: test-k8s-oldest
test-k8s-oldest: tools chart-deps images gitops-images release-e2e ## the cluster tests (the matrix) on the oldest Kubernetes the charts claim (hack/lib.sh PREMIGRATE_K8S=oldest: its own node image, cluster premigrate-oldest, ImageVolume turned on for the scenario that asks for gate.delivery imageVolume)
	@node_image=$$(PREMIGRATE_K8S=oldest hack/offline/kind/node-image.sh) && KIND_NODE_IMAGE="$$node_image" KIND_CLUSTER_NAME=premigrate-oldest \
	  KIND_FEATURE_GATES=ImageVolume=true $(E2E_MATRIX) \
	  go test -tags e2e ./test/e2e/ -count=1 -timeout 100m -parallel 256 -v $(E2E_FLAGS) 2>&1 | tee "$(PREMIGRATE_CACHE)/logs/e2e-oldest.log"

.PHONY: test
test: test-fast test-e2e ## what CI runs: lint, unit, render, the unit-level mutants and the cluster tests' CI tier on kind

.PHONY: test-matrix
test-matrix: test-fast test-e2e-matrix ## every test: lint, unit, render, the unit-level mutants and every cluster scenario at full depth

.PHONY: test-mutants-unit
test-mutants-unit: ## break the chart, the library and the gate on purpose (hack/mutants/mutants.yaml); each mutant's unit or render test must fail on an assertion
	@go run ./hack/mutants --level unit 2>&1 | tee "$(PREMIGRATE_CACHE)/logs/mutants-unit.log"

.PHONY: test-mutants
test-mutants: tools chart-deps images release-e2e ## the mutants at MUTANTS_LEVEL (unit, or cluster: each mutant's cluster scenarios on kind); MUTANTS=<regexp> picks some (MUTANTS.md)
	@node_image=$$(hack/offline/kind/node-image.sh) && KIND_NODE_IMAGE="$$node_image" \
	  go run ./hack/mutants --level $(or $(MUTANTS_LEVEL),unit) --only '$(MUTANTS)' 2>&1 | tee "$(PREMIGRATE_CACHE)/logs/mutants.log"

.PHONY: demo
demo: ## a kind cluster, the chart installed with its embedded database, upgraded, shown working (builds only the demo's tools and images)
	@PREMIGRATE_TOOLS="helm kubectl" hack/tools.sh
	$(chart_deps)
	@IMAGE_SET=demo hack/images.sh
	@node_image=$$(hack/offline/kind/node-image.sh) && go run ./test/cmd/cluster up --node-image "$$node_image"
	@hack/demo.sh

.PHONY: bench
bench: tools chart-deps images ## measure gate latency, upgrade overhead and sizes; writes a dated report
	@node_image=$$(hack/offline/kind/node-image.sh) && KIND_NODE_IMAGE="$$node_image" \
	  go test -tags e2e ./test/bench/ -count=1 -timeout 60m -parallel 256 -v -run '$(or $(BENCH_RUN),.)' 2>&1 | tee "$(PREMIGRATE_CACHE)/logs/bench.log"

.PHONY: docs
docs: tools ## regenerate the chart README's values table with helm-docs
	helm-docs --chart-search-root charts --template-files README.md.gotmpl

.PHONY: release
release: tools ## multi-arch (amd64, arm64) images and the chart as OCI artifacts in the OCI layout dist/oci, offline, verified
	@hack/release.sh

.PHONY: package
package: tools chart-deps ## helm package + helm repo index into ./dist/repo
	mkdir -p dist/repo
	helm package $(CHART) -d dist/repo
	helm repo index dist/repo
