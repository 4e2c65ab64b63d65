# shellcheck shell=bash
# Shared settings and helpers for hack/ scripts. Source it; do not run it.
# Everything built, cached or logged lives under $PREMIGRATE_CACHE, never in the repository.
set -euo pipefail

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HACK_DIR/.." && pwd)
export PREMIGRATE_CACHE=${PREMIGRATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/premigrate}
export LOGS=$PREMIGRATE_CACHE/logs
mkdir -p "$LOGS"

# Pinned versions of everything the offline kind node image is made of. PREMIGRATE_K8S picks the Kubernetes:
# `newest` (the default: every cluster of make test, the tools, the schemas of lint) or `oldest`, the oldest
# minor the charts' kubeVersion claims (make test-k8s-oldest builds its node image and runs the suite on it).
# etcd, CoreDNS and pause are the versions that minor's kubeadm asks for (its constants.go).
case ${PREMIGRATE_K8S:-newest} in
  newest)
    export K8S_VERSION=v1.37.2 K8S_STAGING_VERSION=v0.37.2
    export ETCD_VERSION=v3.7.0 ETCD_IMAGE_TAG=3.7.0-0
    export COREDNS_VERSION=v1.14.6 PAUSE_TAG=3.10.2 ;;
  oldest)
    export K8S_VERSION=v1.33.13 K8S_STAGING_VERSION=v0.33.13
    export ETCD_VERSION=v3.5.24 ETCD_IMAGE_TAG=3.5.24-0
    export COREDNS_VERSION=v1.12.0 PAUSE_TAG=3.10 ;;
  *) echo "error: PREMIGRATE_K8S=${PREMIGRATE_K8S} is neither newest nor oldest" >&2; exit 2 ;;
esac
export KIND_VERSION=v0.33.0
export CONTAINERD_VERSION=v2.3.4 CRICTL_VERSION=v1.36.0
export GOFLAGS=${GOFLAGS:--buildvcs=false}

# A clean PATH for daemons: dockerd must never find the containerd 2.x shim we build for the node.
export CLEAN_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

T_START=$(date +%s)
elapsed() { echo "$(( $(date +%s) - T_START ))s"; }
say() { printf '[%s +%s] %s\n' "$(date +%H:%M:%S)" "$(elapsed)" "$*"; }

# step NAME CMD...: runs CMD with its output in $LOGS/NAME.log, printing a progress line every 30 s.
# On failure, prints the log's tail and returns CMD's exit code.
step() {
  local name=$1; shift
  local log=$LOGS/$name.log s; s=$(date +%s)
  say "$name: started (log: $log)"
  "$@" >"$log" 2>&1 &
  local pid=$! n=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1; n=$((n + 1))
    if (( n % 30 == 0 )); then say "$name: still running, $(( $(date +%s) - s ))s (log: $log)"; fi
  done
  local rc=0; wait "$pid" || rc=$?
  if (( rc != 0 )); then
    say "$name: FAILED after $(( $(date +%s) - s ))s (exit $rc); last lines of $log:"
    tail -n 40 "$log" | sed 's/^/    /'
    return "$rc"
  fi
  say "$name: done in $(( $(date +%s) - s ))s"
  echo "$(date -u +%FT%TZ) $name $(( $(date +%s) - s ))s" >>"$LOGS/timings.txt"
}

# key FILES...: a short hash of the given files' content plus the pinned versions (cache keys).
key() {
  { echo "$K8S_VERSION $K8S_STAGING_VERSION $KIND_VERSION $CONTAINERD_VERSION $CRICTL_VERSION $ETCD_VERSION"
    echo "$ETCD_IMAGE_TAG $COREDNS_VERSION $PAUSE_TAG"; cat "$@"; } | sha256sum | cut -c1-12
}

# chart_field DIR FIELD prints a top-level field of DIR/Chart.yaml (version, appVersion), quotes removed;
# nothing when it is not there. Every script reads chart versions through it.
chart_field() { awk -v k="$2:" '$1 == k {gsub(/"/, "", $2); print $2; exit}' "$1/Chart.yaml"; }

need_root() { [ "$(id -u)" = 0 ] || { echo "error: $1 needs root (or install it by hand)" >&2; exit 1; }; }

# apt_install PKG...: installs the Debian packages that are missing, once.
apt_install() {
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  (( ${#missing[@]} == 0 )) && return 0
  need_root "installing ${missing[*]}"
  say "apt: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
