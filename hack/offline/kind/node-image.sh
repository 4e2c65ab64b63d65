#!/usr/bin/env bash
# Prints the kind node image to use, building it offline when needed. Progress goes to stderr.
#   1. $KIND_NODE_IMAGE when set (pulled by docker if it is missing);
#   2. a stock kindest/node:v1.37.x already in docker;
#   3. our offline image premigrate/kind-node:<k8s>-<key>, when docker has it (a cached run: under 5 s);
#   4. otherwise builds it: Kubernetes, containerd, crictl, etcd, CoreDNS and pause from the Go module proxy,
#      a Debian bookworm rootfs with debootstrap, the control-plane images with mkimg, assembled by hand.
# The key hashes every input script, so a change to any of them rebuilds; the Go build cache keeps that cheap.
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"; . "$HACK_DIR/offline/kind/env.sh"
exec 3>&1 1>&2   # stdout (fd 3) carries only the image name

"$HACK_DIR/offline/docker.sh" 3>&-
if [ -n "${KIND_NODE_IMAGE:-}" ]; then
  docker image inspect "$KIND_NODE_IMAGE" >/dev/null 2>&1 || docker pull "$KIND_NODE_IMAGE"
  echo "$KIND_NODE_IMAGE" >&3; exit 0
fi
stock=$(docker image ls --format '{{.Repository}}:{{.Tag}}' kindest/node 2>/dev/null | grep -E ":v${K8S_VERSION%.*}\." | sort -V | tail -n1 || true)
if [ -n "$stock" ]; then say "node image: using stock $stock"; echo "$stock" >&3; exit 0; fi

K=$(key "$HACK_DIR"/offline/kind/*.sh "$HACK_DIR"/offline/{iptables-wrapper,hostpath-provisioner}/main.go "$HACK_DIR"/mkimg/main.go "$HACK_DIR"/imagebuild/imagebuild.go)
IMAGE=premigrate/kind-node:$K8S_VERSION-$K
if docker image inspect "$IMAGE" >/dev/null 2>&1; then say "node image: $IMAGE (cached)"; echo "$IMAGE" >&3; exit 0; fi

say "node image: building $IMAGE offline (cold: about 13 min on 2 cores; logs in $LOGS)"
apt_install debootstrap gcc libc6-dev binutils jq ca-certificates
# the three long steps run side by side: Kubernetes, the node tools, the Debian rootfs
step node-build-k8s "$HACK_DIR/offline/kind/build-k8s.sh" & p1=$!
step node-build-tools "$HACK_DIR/offline/kind/build-node-tools.sh" & p2=$!
step node-rootfs "$HACK_DIR/offline/kind/rootfs.sh" & p3=$!
rc=0; wait $p1 || rc=1; wait $p2 || rc=1; wait $p3 || rc=1
(( rc == 0 )) || { echo "error: node image inputs failed to build; see $LOGS" >&2; exit 1; }
ROOTFS=$KO/out/rootfs-base-$(key "$HACK_DIR/offline/kind/rootfs.sh").tar
step node-control-plane-images "$HACK_DIR/offline/kind/control-plane-images.sh" "$ROOTFS"
step node-assemble "$HACK_DIR/offline/kind/assemble.sh" "$ROOTFS" "$IMAGE"
# older offline node images of this Kubernetes only take disk space
docker image ls --format '{{.Repository}}:{{.Tag}}' premigrate/kind-node | grep "^premigrate/kind-node:$K8S_VERSION-" |
  grep -vx "$IMAGE" | xargs -r docker rmi >/dev/null 2>&1 || true
say "node image: $IMAGE ready"
echo "$IMAGE" >&3
