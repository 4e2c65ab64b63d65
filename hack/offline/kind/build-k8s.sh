#!/usr/bin/env bash
# Builds kubeadm, kubelet, kubectl and the control-plane binaries from the k8s.io/kubernetes module through a
# generated wrapper module (the module's staging replaces need pinning), with the real version stamped in.
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"; . "$HACK_DIR/offline/kind/env.sh"
CMDS=${K8S_CMDS:-kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy}
stamp=$KO_BIN/.k8s-$K8S_VERSION-$(echo "$CMDS" | tr ' ' '-')
[ -f "$stamp" ] && { echo "cached: $stamp"; exit 0; }
W=$KO_BUILD/k8s; mkdir -p "$W"; cd "$W"
STAGING="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider cluster-bootstrap
  code-generator component-base component-helpers controller-manager cri-api cri-client cri-streaming
  csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
  kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission
  sample-apiserver streaming"
{
  printf 'module premigrate.local/k8sbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
  for m in $STAGING; do printf '\tk8s.io/%s => k8s.io/%s %s\n' "$m" "$m" "$K8S_STAGING_VERSION"; done
  printf ')\n'
} >go.mod
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
