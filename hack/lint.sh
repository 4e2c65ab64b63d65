#!/usr/bin/env bash
# Every static check of the repository; run through `make lint` (which installs the tools first).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
export PATH=$REPO_ROOT/bin:$PATH
CHART=charts/premigrate
# every optional object and pod setting on (the HTTPRoute needs Gateway API's CRDs, so it is not a ci/ file)
FEATURES=hack/lint-features-values.yaml
fail=0
# check NAME CMD...: runs one check into its log; a long one (go vet on empty caches) says so every 30 s
check() {
  local name=$1; shift; local log=$LOGS/lint-$name.log s; s=$(date +%s)
  "$@" >"$log" 2>&1 &
  local pid=$! n=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.2; n=$((n + 1))
    if (( n % 150 == 0 )); then say "lint $name: still running, $(( $(date +%s) - s ))s (log: $log)"; fi
  done
  if wait "$pid"; then say "lint $name: ok"; else
    say "lint $name: FAILED (log: $log)"; sed 's/^/    /' "$log" | tail -n 40; fail=1; fi
}

# the three modules of go.work: the product (.), the workshop (hack) and the proof (test; its cluster tests
# build only with the e2e tag)
GO_MODULES=(./... ./hack/... ./test/...)
check go-vet go vet -tags e2e "${GO_MODULES[@]}"
check golangci-lint golangci-lint run "${GO_MODULES[@]}"
# the product module needs only what it ships: no helm, kind, terratest or image builder may creep back in
product_deps() {
  local bad
  bad=$(GOWORK=off go list -m all | grep -E '^(helm\.sh/|sigs\.k8s\.io/kind |github\.com/gruntwork-io/|github\.com/google/go-containerregistry )' || true)
  [ -z "$bad" ] || { echo "the root module (what ships) requires test or workshop modules:"; echo "$bad"; return 1; }
  echo "the root module requires $(( $(GOWORK=off go list -m all | wc -l) - 1 )) modules, none of the proof's or the workshop's"
}
check product-deps product_deps
# no binaries in git: every tracked file is text, except images and archives under a testdata folder
no_binaries() {
  local bad
  bad=$(git ls-files --eol | awk '$1 == "i/-text" {print $NF}' | grep -v '/testdata/' || true)
  [ -z "$bad" ] || { echo "binary files are tracked (build into ./bin, or keep fixtures under testdata/):"; echo "$bad"; return 1; }
  echo "$(git ls-files | wc -l) tracked files, none binary outside testdata/"
}
check no-binaries no_binaries
EXAMPLE=examples/ledger/chart
for h in helm helm4; do check "$h-lint" "$h" lint --strict "$CHART" charts/premigrate-lib "$EXAMPLE"; done
for f in "$CHART"/ci/*-values.yaml "$FEATURES"; do check "helm-lint-$(basename "$f" .yaml)" helm lint --strict "$CHART" -f "$f"; done
check yamllint yamllint -c .yamllint.yaml ct.yaml .yamllint.yaml "$CHART/Chart.yaml" "$CHART/values.yaml" "$CHART/ci" "$FEATURES" charts/premigrate-lib/Chart.yaml
# chart-testing: yamale (its chart-schema check) is not packaged for Debian, so that one check is off here
check ct-lint ct lint --config ct.yaml --charts "$CHART" --validate-chart-schema=false
# the values table in the chart README is generated: fail when it drifts from values.yaml
docs_drift() {
  local tmp; tmp=$(mktemp -d); cp -r "$CHART" "$tmp/"
  helm-docs --chart-search-root "$tmp" --template-files README.md.gotmpl >/dev/null
  diff -u "$CHART/README.md" "$tmp/premigrate/README.md" || { echo "charts/premigrate/README.md is stale: run make docs"; return 1; }
}
check helm-docs docs_drift
# chart-testing's own version check compares against a branch (it fails on main itself); this compares each chart
# with the previous release (hack/previous-release): a chart that changed since then must carry a higher version
chart_versions() {
  local prev c old new
  prev=$(sed -n 's/^commit=//p' hack/previous-release)
  git cat-file -e "$prev^{commit}" || { echo "the previous release's commit $prev is not in this clone"; return 1; }
  for c in "$CHART" charts/premigrate-lib "$EXAMPLE"; do
    new=$(chart_field "$c" version)
    if ! old=$(git show "$prev:$c/Chart.yaml" 2>/dev/null | awk '/^version:/{print $2}') || [ -z "$old" ]; then
      echo "$c: $new (new since the previous release)"; continue
    fi
    if git diff --quiet "$prev" -- "$c"; then echo "$c: $new (unchanged)"; continue; fi
    if [ "$new" = "$old" ] || [ "$(printf '%s\n%s\n' "$old" "$new" | sort -V | tail -n1)" != "$new" ]; then
      echo "$c changed since the previous release ($prev) but its version $new is not above $old: bump version in $c/Chart.yaml"; return 1
    fi
    echo "$c: $old -> $new"
  done
}
check chart-versions chart_versions
# every mode rendered and validated strictly against the Kubernetes $K8S_VERSION OpenAPI schemas (and the
# HTTPRoute against Gateway API's CRD: hack/tools.sh)
kubeconform_all() {
  local f args
  for f in "" "$CHART"/ci/*-values.yaml "$FEATURES"; do
    args=(); [ -n "$f" ] && args=(-f "$f")
    # helm template renders without a cluster, where the chart refuses to generate the embedded database's
    # password (each render would make another one); the features file takes it from a Secret of its own
    [ "$f" = "$FEATURES" ] || args+=(--set postgresql.auth.password=rendered-without-a-cluster)
    echo "== ${f:-default values}"
    helm template kc "$CHART" "${args[@]}" | kubeconform -strict -summary -kubernetes-version "${K8S_VERSION#v}" \
      -schema-location "$REPO_ROOT/bin/kubeconform-schemas/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json" || return 1
  done
  echo "== the adopter example $EXAMPLE"
  helm template kc "$EXAMPLE" | kubeconform -strict -summary -kubernetes-version "${K8S_VERSION#v}" \
    -schema-location "$REPO_ROOT/bin/kubeconform-schemas/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json" || return 1
}
check kubeconform kubeconform_all
exit $fail
