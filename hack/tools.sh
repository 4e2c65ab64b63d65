#!/usr/bin/env bash
# Installs the pinned chart tooling from the Go module proxy and Debian only, into
# $PREMIGRATE_CACHE/tools (one file per tool and version, so a version bump rebuilds just that tool) and links
# it into ./bin. A second run with everything cached takes about a second.
# PREMIGRATE_TOOLS="helm kubectl" installs only the tools named (make demo: what the demo runs); unset, all.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HELM3_VERSION=v3.21.4 HELM4_VERSION=v4.3.1 CT_VERSION=v3.14.0 KUBECONFORM_VERSION=v0.7.0
HELM_DOCS_VERSION=v1.14.2 GOLANGCI_LINT_VERSION=v2.15.0 GATEWAY_API_VERSION=v1.4.0
# crane (the README's mirroring command) and the registry the release is pushed to on kind (the OCI distribution
# reference implementation, static: it runs in an image of its own)
CRANE_VERSION=v0.22.1 DISTRIBUTION_VERSION=v3.1.2
T=$PREMIGRATE_CACHE/tools; mkdir -p "$T" "$REPO_ROOT/bin"
export GOFLAGS=-buildvcs=false

# tool NAME VERSION BUILD-CMD...: runs BUILD-CMD (which writes $out) unless $T/NAME-VERSION exists, then links it
tool() {
  local name=$1 version=$2; shift 2
  out=$T/$name-$version
  if [ ! -e "$out" ]; then step "tool-$name-$version" "$@"; fi
  ln -sfn "$out" "$REPO_ROOT/bin/$name"
}
# want NAME: whether NAME is one of the tools to install
want() { [ -z "${PREMIGRATE_TOOLS:-}" ] || [[ " $PREMIGRATE_TOOLS " == *" $1 "* ]]; }
ALL_TOOLS="helm helm4 kubeconform helm-docs golangci-lint ct kind kubectl kubeconform-schemas yamllint crane registry"
for n in ${PREMIGRATE_TOOLS:-}; do
  [[ " $ALL_TOOLS " == *" $n "* ]] || { echo "error: PREMIGRATE_TOOLS names \"$n\", which is not one of: $ALL_TOOLS" >&2; exit 2; }
done
gobin() { # gobin PKG@VERSION [go install flags...]: go install into a temp GOBIN, then move to $out
  local pkg=$1; shift; local d; d=$(mktemp -d)
  GOBIN=$d go install -trimpath "$@" "$pkg" && mv "$d/$(basename "${pkg%@*}")" "$out"; rm -rf "$d"
}
toolmod() { # toolmod NAME PKG VERSION: build a tool whose own go.mod forbids `go install @version`
  local name=$1 pkg=$2 version=$3 d=$T/mod-$1-$3
  mkdir -p "$d" && cd "$d" && { [ -f go.mod ] || go mod init "premigrate.local/tools/$name"; } &&
    go get -tool "$pkg@$version" && go build -trimpath -ldflags "-s -w" -o "$out" "$pkg"
}

H3="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM3_VERSION"
k8s_minor=$(echo "$K8S_VERSION" | cut -d. -f2)
# without these a `go install`ed helm 3 reports a bare version and KubeVersion v1.20.0 to charts
for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  H3="$H3 -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$k8s_minor"
done
if want helm; then
  tool helm "$HELM3_VERSION" gobin "helm.sh/helm/v3/cmd/helm@$HELM3_VERSION" -ldflags "$H3"
fi
if want helm4; then
  tool helm4 "$HELM4_VERSION" gobin "helm.sh/helm/v4/cmd/helm@$HELM4_VERSION" \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM4_VERSION"
fi
if want kubeconform; then
  tool kubeconform "$KUBECONFORM_VERSION" gobin "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" -ldflags "-s -w"
fi
if want crane; then
  tool crane "$CRANE_VERSION" gobin "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION" -ldflags "-s -w"
fi
if want registry; then
  static_gobin() { CGO_ENABLED=0 gobin "$@"; }
  tool registry "$DISTRIBUTION_VERSION" static_gobin "github.com/distribution/distribution/v3/cmd/registry@$DISTRIBUTION_VERSION" -ldflags "-s -w"
fi
if want helm-docs; then
  tool helm-docs "$HELM_DOCS_VERSION" gobin "github.com/norwoodj/helm-docs/cmd/helm-docs@$HELM_DOCS_VERSION" -ldflags "-s -w"
fi
if want golangci-lint; then
  tool golangci-lint "$GOLANGCI_LINT_VERSION" gobin "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
fi
# chart-testing refuses `go install @version` (its version list is not served): a tools module does it
if want ct; then
  tool ct "$CT_VERSION" toolmod ct github.com/helm/chart-testing/v3/ct "$CT_VERSION"
  ctetc=$T/ct-etc-$CT_VERSION
  if [ ! -d "$ctetc" ]; then
    mkdir -p "$ctetc"; cp "$(go mod download -json "github.com/helm/chart-testing/v3@$CT_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"/etc/*.yaml "$ctetc/"
    chmod u+w "$ctetc"/*
  fi
  ln -sfn "$ctetc" "$REPO_ROOT/bin/ct-etc"
fi
# kind's CLI, at the version go.mod pins for the harness
if want kind; then
  tool kind "$KIND_VERSION" sh -c "cd '$REPO_ROOT' && go build -trimpath -ldflags '-s -w' -o '$T/kind-$KIND_VERSION' sigs.k8s.io/kind"
fi
# kubectl: the one on PATH, else the node build's, else built from the Kubernetes module
if want kubectl; then
  kubectl_out=$T/kubectl-$K8S_VERSION
  if [ ! -e "$kubectl_out" ]; then
    if k=$(command -v kubectl) && [ "$(readlink -f "$k")" != "$(readlink -f "$REPO_ROOT/bin/kubectl")" ]; then cp "$k" "$kubectl_out"
    elif [ -x "$PREMIGRATE_CACHE/kind/out/bin/kubectl" ]; then cp "$PREMIGRATE_CACHE/kind/out/bin/kubectl" "$kubectl_out"
    else step tool-kubectl env K8S_CMDS=kubectl "$HACK_DIR/offline/kind/build-k8s.sh" && cp "$PREMIGRATE_CACHE/kind/out/bin/kubectl" "$kubectl_out"
    fi
  fi
  ln -sfn "$kubectl_out" "$REPO_ROOT/bin/kubectl"
fi
# kubeconform's schemas, generated offline from the OpenAPI document in the Kubernetes module, and the
# HTTPRoute's from the CRD in the Gateway API module
if want kubeconform-schemas; then
  schemas=$T/kubeconform-schemas-$K8S_VERSION-gateway-api-$GATEWAY_API_VERSION
  if [ ! -d "$schemas" ]; then
    kdir=$(cd / && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
    gdir=$(cd / && go mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
    step tool-kubeconform-schemas go run -C "$REPO_ROOT" ./hack/k8s-schemagen -in "$kdir/api/openapi-spec/swagger.json" \
      -crd "$gdir/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml" \
      -out "$schemas.tmp" -k8s-version "${K8S_VERSION#v}" && mv "$schemas.tmp" "$schemas"
  fi
  ln -sfn "$schemas" "$REPO_ROOT/bin/kubeconform-schemas"
fi
if want yamllint; then
  apt_install yamllint
  # Debian's, by path: `command -v` finds this very link once bin/ is on PATH (make puts it first)
  ln -sfn /usr/bin/yamllint "$REPO_ROOT/bin/yamllint"
fi
say "tools ready in $REPO_ROOT/bin: $(cd "$REPO_ROOT/bin" && ls | tr '\n' ' ')"
