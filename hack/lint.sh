#!/usr/bin/env bash
# Every static check of the repository; run through `make lint` (which installs the tools first).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
export PATH=$REPO_ROOT/bin:$PATH
CHART=charts/premigrate
# every optional object and pod setting on (the HTTPRoute needs Gateway API's CRDs, so it is not a ci/ file)
FEATURES=hack/lint-features-values.yaml
fail=0
check() { local name=$1; shift; if "$@" >"$LOGS/lint-$name.log" 2>&1; then say "lint $name: ok"; else
  say "lint $name: FAILED (log: $LOGS/lint-$name.log)"; sed 's/^/    /' "$LOGS/lint-$name.log" | tail -n 40; fail=1; fi; }

check go-vet go vet ./...
check golangci-lint golangci-lint run ./...
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
# every mode rendered and validated strictly against the Kubernetes $K8S_VERSION OpenAPI schemas (and the
# HTTPRoute against Gateway API's CRD: hack/tools.sh)
kubeconform_all() {
  local f args
  for f in "" "$CHART"/ci/*-values.yaml "$FEATURES"; do
    args=(); [ -n "$f" ] && args=(-f "$f")
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
