#!/usr/bin/env bash
# Builds what the node needs besides Kubernetes: containerd (+ctr, shim), crictl, etcd, CoreDNS, pause
# (Kubernetes' own pause.c, static) and an iptables backend selector for the kube-proxy image.
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"; . "$HACK_DIR/offline/kind/env.sh"
stamp=$KO_BIN/.tools-$(key "${BASH_SOURCE[0]}" "$HACK_DIR"/offline/{iptables-wrapper,hostpath-provisioner}/main.go "$HACK_DIR"/mkimg/main.go "$HACK_DIR"/imagebuild/imagebuild.go)
[ -f "$stamp" ] && { echo "cached: $stamp"; exit 0; }
cd "$KO_BUILD"
GOBIN=$KO_BIN go install -trimpath -tags "no_btrfs no_devmapper no_zfs no_aufs" \
  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
  github.com/containerd/containerd/v2/cmd/{containerd,ctr,containerd-shim-runc-v2}@$CONTAINERD_VERSION
GOBIN=$KO_BIN go install -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
  sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION
# etcd's server module carries replace directives, so `go install @version` refuses it: wrapper module
mkdir -p etcd; (
  cd etcd
  printf 'module premigrate.local/etcdbuild\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3/etcdmain"\n' >tools.go
  go mod tidy
  go build -trimpath -ldflags "-s -w" -o "$KO_BIN/etcd" go.etcd.io/etcd/server/v3
)
GOBIN=$KO_BIN go install -trimpath -ldflags "-s -w" github.com/coredns/coredns@$COREDNS_VERSION
go mod download k8s.io/kubernetes@$K8S_VERSION
gcc -Os -Wall -Werror -static -DVERSION=v$PAUSE_TAG-premigrate -o "$KO_BIN/pause" \
  "$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION/build/pause/linux/pause.c"
strip "$KO_BIN/pause"
go build -C "$REPO_ROOT" -trimpath -ldflags "-s -w" -o "$KO_BIN/iptables-wrapper" ./hack/offline/iptables-wrapper
go build -C "$REPO_ROOT" -trimpath -o "$KO_BIN/mkimg" ./hack/mkimg
go build -C "$REPO_ROOT" -trimpath -ldflags "-s -w" -o "$KO_BIN/hostpath-provisioner" ./hack/offline/hostpath-provisioner
touch "$stamp"; ls -la "$KO_BIN"
