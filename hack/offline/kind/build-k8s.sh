#!/usr/bin/env bash
# Builds kubeadm, kubelet, kubectl and the control-plane binaries from the k8s.io/kubernetes module through a
# generated wrapper module (the module's staging replaces need pinning), with the real version stamped in.
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"; . "$HACK_DIR/offline/kind/env.sh"
CMDS=${K8S_CMDS:-kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy}
stamp=$KO_BIN/.k8s-$K8S_VERSION-$(echo "$CMDS" | tr ' ' '-')
[ -f "$stamp" ] && { echo "cached: $stamp"; exit 0; }
W=$KO_BUILD/k8s; mkdir -p "$W"; cd "$W"
# the staging modules are the ones the module's own go.mod replaces with ./staging (they differ per minor); one
# that the module proxy does not serve at the staging version (the sample-* ones of some minors) is replaced by
# an empty module: nothing built here imports it, but the module graph names it
kdir=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
STAGING=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\/k8s\.io\// {sub(/^k8s\.io\//, "", $1); print $1}' "$kdir/go.mod")
[ -n "$STAGING" ] || { echo "error: no staging replaces in $kdir/go.mod" >&2; exit 1; }
{
  printf 'module premigrate.local/k8sbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
  for m in $STAGING; do
    if go list -m "k8s.io/$m@$K8S_STAGING_VERSION" >/dev/null 2>&1; then
      printf '\tk8s.io/%s => k8s.io/%s %s\n' "$m" "$m" "$K8S_STAGING_VERSION"
    else
      mkdir -p "stub/$m"; printf 'module k8s.io/%s\n\ngo 1.21\n' "$m" >"stub/$m/go.mod"
      printf '\tk8s.io/%s => ./stub/%s\n' "$m" "$m"; echo "k8s.io/$m@$K8S_STAGING_VERSION is not served: an empty module stands in" >&2
    fi
  done
  printf ')\n'
} >go.mod.new   # not go.mod itself: the go list above runs in this folder, and a half-written go.mod fails it
mv go.mod.new go.mod
cat >tools.go <<'EOT'
//go:build tools

package tools

import (
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubeadm/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
EOT
go mod tidy
v=${K8S_VERSION#v}; maj=${v%%.*}; min=${v#*.}; min=${min%%.*}
LD="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LD="$LD -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$maj -X $p.gitMinor=$min -X $p.gitTreeState=clean"
  LD="$LD -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=2026-01-01T00:00:00Z"
done
# one `go build` for all commands, so package compiles are shared and links overlap
# shellcheck disable=SC2046
go build -trimpath -ldflags "$LD" -o "$KO_BIN/" $(for c in $CMDS; do echo "k8s.io/kubernetes/cmd/$c"; done)
touch "$stamp"; ls -la "$KO_BIN"
