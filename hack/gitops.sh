#!/usr/bin/env bash
# Flux and Argo CD on the offline kind cluster, built from source here (Go module proxy, Debian packages),
# with an in-cluster Helm repository that serves this checkout's chart.
#
#   hack/gitops.sh build [flux|argocd|all]  build the images (cached by version in $PREMIGRATE_CACHE/gitops)
#   hack/gitops.sh up [flux|argocd|all]     build, load the images into the kind cluster, install or upgrade
#                                           the chart server, Flux and/or Argo CD, wait until they are Ready
#   hack/gitops.sh charts [CHART_DIR...]    package the chart(s) (default charts/premigrate) and refresh the
#                                           served repository: http://chart-server.gitops-charts.svc.cluster.local
#   hack/gitops.sh down                     uninstall all of it (Flux and Argo CD objects first, then the controllers)
#   hack/gitops.sh status                   what is installed and Ready
#   hack/gitops.sh smoke [flux|argocd|all]  install the served chart once through each (manifests/smoke-*.yaml),
#                                           wait until Ready (Flux) or Synced, Healthy and Succeeded (Argo CD),
#                                           then remove it again
#
# Environment: KUBECONFIG (default $PREMIGRATE_CACHE/kubeconfig), KIND_CLUSTER_NAME (default premigrate),
# GITOPS_CHART_VERSION (charts: package under this version instead of Chart.yaml's; Flux and Argo CD only
# notice a changed chart under a new version), GITOPS_CHARTS_KEEP=1 (charts: keep serving the packages of
# earlier runs too; by default the repository holds only what this run packaged).
# GITOPS_LINK_IMAGES=0 (build: do not link the archives into $PREMIGRATE_CACHE/images, which the cluster test
# harness loads into every cluster it makes).
# Cold, on 2 cores and an otherwise idle machine (2026-12-01): source-controller 4 min, helm-controller 2 min,
# Argo CD 5 min, 11 min 50 s with the images; 3.5, 10.5 and 19 min when other builds and cluster tests shared the
# cores. Binaries, archives and manifests are cached by version under $PREMIGRATE_CACHE/gitops: a
# warm `build` takes about a second, a warm `up` about 10 s, an `up` after `down` about 30 s.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FLUX_SOURCE_VERSION=v1.7.3 # the newest source-controller served on the helm-controller v1.4.0 line (api v1.7.x, Helm v3.19.0)
FLUX_HELM_VERSION=v1.4.0
ARGOCD_VERSION=v3.6.1
ARGOCD_GOTOOLCHAIN=go1.27.3 # Argo CD v3.6's go.mod says go 1.27.0
IMAGE_REV=r2                # bump when an image's recipe below changes: the cached archives are then rebuilt

G=$PREMIGRATE_CACHE/gitops
GBIN=$G/bin GIMG=$G/images GMAN=$G/manifests REPO=$G/repo W=$G/build
HARNESS_IMAGES=$PREMIGRATE_CACHE/images # the cluster test harness loads every *.tar in it
GITOPS_DIR=$HACK_DIR/gitops
KUBECTL=$REPO_ROOT/bin/kubectl KIND=$REPO_ROOT/bin/kind HELM=$REPO_ROOT/bin/helm
HELM4=$REPO_ROOT/bin/helm4 # Argo CD v3.6.1 is built and tested with Helm 4.3.1 (its hack/tool-versions.sh)
export KIND_CLUSTER_NAME=${KIND_CLUSTER_NAME:-premigrate}
if [ -z "${KUBECONFIG:-}" ] && [ -f "$PREMIGRATE_CACHE/kubeconfig" ]; then export KUBECONFIG=$PREMIGRATE_CACHE/kubeconfig; fi
mkdir -p "$GBIN" "$GIMG" "$GMAN" "$REPO" "$W"
K() { "$KUBECTL" "$@"; }

need_tools() {
  local t
  for t in "$KUBECTL" "$KIND" "$HELM" "$HELM4"; do
    [ -x "$t" ] || { echo "error: $t is missing: run make tools" >&2; exit 1; }
  done
}

# ---------------------------------------------------------------------------------------------------- build

# go_bin NAME VERSION MODULE_DIR PACKAGE [GOTOOLCHAIN [LDFLAGS]]: builds a static binary into
# $GBIN/NAME-VERSION once (delete it to rebuild).
go_bin() {
  local name=$1 version=$2 dir=$3 pkg=$4 toolchain=${5:-} ldflags=${6:-}
  local out=$GBIN/$name-$version
  [ -x "$out" ] && return 0
    # shellcheck disable=SC2016 # the inner script's variables are its own
  step "gitops-go-build-$name-$version" env -C "$dir" GOWORK=off ${toolchain:+GOTOOLCHAIN=$toolchain} CGO_ENABLED=0 \
    bash -c 'go build -trimpath -ldflags "-s -w $3" -o "$1.tmp" "$2" && mv "$1.tmp" "$1"' _ "$out" "$pkg" "$ldflags"
}

mod_dir() { # mod_dir MODULE_DIR MODULE [GOTOOLCHAIN]: where the go command keeps that module's source
  env -C "$1" GOWORK=off ${3:+GOTOOLCHAIN=$3} go list -m -f '{{.Dir}}' "$2"
}

MKIMG=$W/mkimg
mkimg() { "$MKIMG" "$@" >/dev/null; }
prepare_mkimg() {
  [ -x "$MKIMG" ] && [ "$MKIMG" -nt "$HACK_DIR/mkimg/main.go" ] && return 0
  go build -C "$REPO_ROOT" -trimpath -o "$MKIMG" ./hack/mkimg
}

# A distroless-like base: passwd/group with nonroot (65532) and argocd (999), a sticky /tmp, CA certificates.
BASE=$W/base
prepare_base() {
  rm -rf "$BASE"; mkdir -p "$BASE/etc/ssl/certs" "$BASE/tmp" "$BASE/home/argocd"; chmod 1777 "$BASE/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\nargocd:x:999:999:argocd:/home/argocd:/sbin/nologin\n' >"$BASE/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\nargocd:x:999:\n' >"$BASE/etc/group"
  echo 'hosts: files dns' >"$BASE/etc/nsswitch.conf"
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then cp /etc/ssl/certs/ca-certificates.crt "$BASE/etc/ssl/certs/"; fi
}

# link_for_harness NAME ARCHIVE: a hard link under a stable name in $HARNESS_IMAGES (hack/images.sh clears
# that folder on each run; `build` puts the links back in a second).
link_for_harness() {
  mkdir -p "$HARNESS_IMAGES"
  ln -f "$2" "$HARNESS_IMAGES/gitops-$1.tar" 2>/dev/null || cp "$2" "$HARNESS_IMAGES/gitops-$1.tar"
}

# Each image_* function writes its archive unless it exists, and sets ARCHIVE and IMAGE.
image_chart_server() {
  local key; key=$( { cat "$GITOPS_DIR/chartserver/main.go"; echo "$IMAGE_REV"; } | sha256sum | cut -c1-12)
  IMAGE=premigrate/chart-server:dev ARCHIVE=$GIMG/chart-server-$key.tar
  [ -f "$ARCHIVE" ] && return 0
  say "image $IMAGE: building"
  prepare_mkimg; prepare_base
  CGO_ENABLED=0 go build -C "$REPO_ROOT" -trimpath -ldflags "-s -w" -o "$W/chartserver" ./hack/gitops/chartserver
  rm -f "$GIMG"/chart-server-*.tar
  mkimg -o "$ARCHIVE.tmp" -tag "$IMAGE" -dir "$BASE:/" -layer x -file "$W/chartserver:/chartserver" \
    -entrypoint /chartserver -user 65532:65532 && mv "$ARCHIVE.tmp" "$ARCHIVE"
}

image_flux() { # image_flux source|helm
  local which=$1 version mod
  if [ "$which" = source ]; then version=$FLUX_SOURCE_VERSION; else version=$FLUX_HELM_VERSION; fi
  IMAGE=premigrate/flux-$which-controller:$version ARCHIVE=$GIMG/flux-$which-controller-$version-$IMAGE_REV.tar
  [ -f "$ARCHIVE" ] && return 0
  mod=$GITOPS_DIR/flux/$which-controller
  go_bin "$which-controller" "$version" "$mod" "github.com/fluxcd/$which-controller"
  say "image $IMAGE: building"
  prepare_mkimg; prepare_base; rm -f "$GIMG/flux-$which-controller-"*.tar
  mkimg -o "$ARCHIVE.tmp" -tag "$IMAGE" -dir "$BASE:/" -layer x \
    -file "$GBIN/$which-controller-$version:/usr/local/bin/$which-controller" \
    -entrypoint "/usr/local/bin/$which-controller" -user 65532:65532 -env PATH=/usr/local/bin:/usr/bin:/bin &&
    mv "$ARCHIVE.tmp" "$ARCHIVE"
}

flux_crds() { # writes $GMAN/flux-crds-*.yaml from the controllers' modules (config/crd/bases) once
  FLUX_CRDS=$GMAN/flux-crds-source-$FLUX_SOURCE_VERSION-helm-$FLUX_HELM_VERSION.yaml
  [ -s "$FLUX_CRDS" ] && return 0
  local sd hd f
  sd=$(mod_dir "$GITOPS_DIR/flux/source-controller" github.com/fluxcd/source-controller)
  hd=$(mod_dir "$GITOPS_DIR/flux/helm-controller" github.com/fluxcd/helm-controller)
  for f in "$sd"/config/crd/bases/*.yaml "$hd"/config/crd/bases/*.yaml; do echo '---'; cat "$f"; done >"$FLUX_CRDS.tmp"
  mv "$FLUX_CRDS.tmp" "$FLUX_CRDS"
}

# apt_extract DIR PKG...: downloads Debian packages (not installed) and unpacks them into DIR.
apt_extract() {
  local dir=$1 d p; shift; d=$(mktemp -d); mkdir -p "$dir"
  (cd "$d" && chmod 777 . && apt-get download -qq "$@" >/dev/null 2>&1) || {
    apt-get update -qq && (cd "$d" && apt-get download -qq "$@" >/dev/null)
  }
  for p in "$d"/*.deb; do dpkg-deb -x "$p" "$dir"; done
  rm -rf "$d"
}

# copy_libs ROOT FILE...: copies the shared libraries FILEs load (as this host resolves them) into ROOT.
copy_libs() {
  local root=$1 lib real; shift
  if ldd "$@" 2>/dev/null | grep 'not found' >&2; then echo "error: libraries of $* are missing on this host" >&2; return 1; fi
  for lib in $( { for f in "$@"; do ldd "$f" 2>/dev/null || true; done; } | grep -o '/[^ ]*\.so[^ ]*' | sort -u) \
    /lib64/ld-linux-x86-64.so.2; do
    real=$(readlink -f "$lib")
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$real" "$root$lib"
  done
}

REDIS_VERSION=
image_redis() {
  # Debian's redis (redis-tools ships the multi-call binary, redis-server is its name for the server)
  REDIS_VERSION=$(apt-cache policy redis-tools 2>/dev/null | awk '/Candidate:/{print $2}')
  if [ -z "$REDIS_VERSION" ] || [ "$REDIS_VERSION" = "(none)" ]; then
    apt-get update -qq; REDIS_VERSION=$(apt-cache policy redis-tools | awk '/Candidate:/{print $2}')
  fi
  local tag; tag=$(echo "${REDIS_VERSION#*:}" | tr -c 'A-Za-z0-9_.\n-' '-')
  IMAGE=premigrate/argocd-redis:$tag ARCHIVE=$GIMG/argocd-redis-$tag-$IMAGE_REV.tar
  [ -f "$ARCHIVE" ] && return 0
  say "image $IMAGE: building from Debian's redis-tools $REDIS_VERSION"
  prepare_mkimg; prepare_base; rm -f "$GIMG/argocd-redis-"*.tar
  apt_install libjemalloc2 liblzf1 libatomic1 libssl3 libsystemd0 # only libraries, for ldd to resolve
  local x=$W/redis-deb r=$W/redis; rm -rf "$x" "$r"
  apt_extract "$x" "redis-tools=$REDIS_VERSION"
  mkdir -p "$r/usr/bin" "$r/data"; chmod 1777 "$r/data"
  cp "$x/usr/bin/redis-check-rdb" "$r/usr/bin/redis-server"
  copy_libs "$r" "$r/usr/bin/redis-server"
  mkimg -o "$ARCHIVE.tmp" -tag "$IMAGE" -dir "$BASE:/" -layer x -dir "$r:/" -workdir /data \
    -entrypoint /usr/bin/redis-server -user 999:999 -env PATH=/usr/bin:/bin && mv "$ARCHIVE.tmp" "$ARCHIVE"
}

image_argocd() {
  local helm_version; helm_version=$(basename "$(readlink -f "$HELM4")" | sed 's/^helm4-//')
  IMAGE=premigrate/argocd:$ARGOCD_VERSION ARCHIVE=$GIMG/argocd-$ARGOCD_VERSION-helm-$helm_version-$IMAGE_REV.tar
  [ -f "$ARCHIVE" ] && return 0
  # the version Argo CD's Makefile sets (it reports "v3.6.1+unknown": the module proxy gives no commit)
  local c=github.com/argoproj/argo-cd/v3/common
  go_bin argocd "$ARGOCD_VERSION" "$GITOPS_DIR/argocd" github.com/argoproj/argo-cd/v3/cmd "$ARGOCD_GOTOOLCHAIN" \
    "-X $c.version=${ARGOCD_VERSION#v} -X $c.gitTag=$ARGOCD_VERSION -X $c.gitTreeState=clean"
  say "image $IMAGE: building (helm $helm_version as /usr/local/bin/helm)"
  prepare_mkimg; prepare_base; rm -f "$GIMG/argocd-v"*.tar
  # tools: tini as PID 1 (the repo server runs helm), busybox's sh/cp/ln (the repo server's copyutil init
  # container), helm 4 with the C library it links
  local x=$W/argocd-deb t=$W/argocd-tools a=$W/argocd-bin n; rm -rf "$x" "$t" "$a"
  apt_extract "$x" tini busybox-static
  mkdir -p "$t/usr/bin" "$t/bin" "$t/usr/local/bin"
  cp "$x/usr/bin/tini-static" "$t/usr/bin/tini"
  cp "$x/bin/busybox" "$t/bin/busybox"
  for n in sh cp ln ls cat mkdir rm; do ln -s busybox "$t/bin/$n"; done
  cp -L "$HELM4" "$t/usr/local/bin/helm"
  copy_libs "$t" "$t/usr/local/bin/helm"
  mkdir -p "$a/usr/local/bin"
  cp "$GBIN/argocd-$ARGOCD_VERSION" "$a/usr/local/bin/argocd"
  for n in argocd-server argocd-repo-server argocd-application-controller argocd-applicationset-controller \
    argocd-cmp-server argocd-commit-server argocd-notifications argocd-dex argocd-git-ask-pass argocd-k8s-auth; do
    ln -s argocd "$a/usr/local/bin/$n"
  done
  mkimg -o "$ARCHIVE.tmp" -tag "$IMAGE" -dir "$BASE:/" -layer x -dir "$t:/" -layer x -dir "$a:/" \
    -entrypoint /usr/bin/tini -entrypoint -- -user 999:999 -workdir /home/argocd \
    -env PATH=/usr/local/bin:/usr/bin:/bin -env HOME=/home/argocd -env USER=argocd \
    -env ARGOCD_GPG_ENABLED=false && mv "$ARCHIVE.tmp" "$ARCHIVE"
}

# argocd_manifest: Argo CD's core install (manifests/core-install.yaml of the module) adapted, once:
# our images, no pulls, without the ApplicationSet controller (core mode as used here has no use for it).
argocd_manifest() { # argocd_manifest ARGOCD_IMAGE REDIS_IMAGE
  ARGOCD_MANIFEST=$GMAN/argocd-core-$ARGOCD_VERSION-$IMAGE_REV-$(echo "$2" | tr ':/' '--').yaml
  [ -s "$ARGOCD_MANIFEST" ] && return 0
  local d; d=$(mod_dir "$GITOPS_DIR/argocd" github.com/argoproj/argo-cd/v3 "$ARGOCD_GOTOOLCHAIN")
  "$GITOPS_DIR/argocd-manifest.sh" "$d/manifests/core-install.yaml" "$1" "$2" >"$ARGOCD_MANIFEST.tmp"
  mv "$ARGOCD_MANIFEST.tmp" "$ARGOCD_MANIFEST"
}

# build_images WHAT: sets ARCHIVES (name=archive) and the image variables for `up`.
declare -A ARCHIVES=()
build_images() {
  local what=$1
  image_chart_server; ARCHIVES[chart-server]=$ARCHIVE CHART_SERVER_IMAGE=$IMAGE
  if [ "$what" = all ] || [ "$what" = flux ]; then
    image_flux source; ARCHIVES[flux-source-controller]=$ARCHIVE SOURCE_CONTROLLER_IMAGE=$IMAGE
    image_flux helm; ARCHIVES[flux-helm-controller]=$ARCHIVE HELM_CONTROLLER_IMAGE=$IMAGE
    flux_crds
  fi
  if [ "$what" = all ] || [ "$what" = argocd ]; then
    image_redis; ARCHIVES[argocd-redis]=$ARCHIVE REDIS_IMAGE=$IMAGE
    image_argocd; ARCHIVES[argocd]=$ARCHIVE ARGOCD_IMAGE=$IMAGE
    argocd_manifest "$ARGOCD_IMAGE" "$REDIS_IMAGE"
  fi
  local n
  if [ "${GITOPS_LINK_IMAGES:-1}" != 0 ]; then
    for n in "${!ARCHIVES[@]}"; do link_for_harness "$n" "${ARCHIVES[$n]}"; done
  fi
}

# ---------------------------------------------------------------------------------------------------- up

# load_image NAME ARCHIVE: loads it into every node of the cluster unless that node has it; the marker is the
# one test/kindcluster's LoadImageArchives keeps (by the archive's name in $HARNESS_IMAGES), so neither
# loads an archive twice. Returns 0 when it loaded something, 1 when every node had it.
load_image() {
  local name=gitops-$1.tar archive=$2 sum node loaded=1
  sum=$(sha256sum "$archive" | cut -c1-16)
  for node in $("$KIND" get nodes --name "$KIND_CLUSTER_NAME"); do
    if docker exec "$node" grep -qx "$sum" "/var/lib/premigrate-images/$name.sha256" 2>/dev/null; then continue; fi
    say "loading $(basename "$archive") ($(du -h "$archive" | cut -f1)) into $node"
    "$KIND" load image-archive "$archive" --name "$KIND_CLUSTER_NAME" --nodes "$node" >>"$LOGS/gitops-load.log" 2>&1
    docker exec "$node" sh -c "mkdir -p /var/lib/premigrate-images && echo $sum > /var/lib/premigrate-images/$name.sha256"
    loaded=0
  done
  return $loaded
}

subst() { # subst FILE: fills in ${CHART_SERVER_IMAGE} and the like
  sed -e "s|\${CHART_SERVER_IMAGE}|${CHART_SERVER_IMAGE:-}|g" -e "s|\${SOURCE_CONTROLLER_IMAGE}|${SOURCE_CONTROLLER_IMAGE:-}|g" \
    -e "s|\${HELM_CONTROLLER_IMAGE}|${HELM_CONTROLLER_IMAGE:-}|g" "$1"
}

# restart_if_loaded NAME KIND/NAME NAMESPACE: a workload whose image was loaded anew under the same tag restarts
restart_if_loaded() {
  if load_image "$1" "${ARCHIVES[$1]}"; then
    if K -n "$3" get "$2" >/dev/null 2>&1; then K -n "$3" rollout restart "$2" >/dev/null; fi
  fi
}

# wake NAMESPACE: every Deployment and StatefulSet of the namespace at zero replicas back to one. The e2e suite
# scales a controller to zero when its last scenario of a run ends; `kubectl apply` of a manifest that names no
# replicas (Argo CD's repo server and redis) keeps that zero, so a kept cluster's next run would find them asleep.
wake() {
  local ns=$1 r
  for r in $(K -n "$ns" get deployments,statefulsets -o jsonpath='{range .items[?(@.spec.replicas==0)]}{.kind}/{.metadata.name}{" "}{end}'); do
    say "$ns/$r was scaled to zero: scaling it to one"
    K -n "$ns" scale "$r" --replicas=1 >/dev/null
  done
}

wait_ready() { # wait_ready NAMESPACE KIND/NAME...: rolled out, with at least one ready replica
  local ns=$1 r ready; shift
  for r in "$@"; do
    say "waiting for $ns/$r to be ready"
    ready=0
    if K -n "$ns" rollout status "$r" --timeout=300s >/dev/null; then ready=$(K -n "$ns" get "$r" -o jsonpath='{.status.readyReplicas}'); fi
    (( ${ready:-0} >= 1 )) || {
      K -n "$ns" get pods -o wide >&2; K -n "$ns" describe "$r" | tail -20 >&2
      echo "error: $ns/$r has no ready replica after 300 s (ready: ${ready:-0}); logs: $KUBECTL -n $ns logs $r" >&2; return 1
    }
  done
}

wait_crds() { # wait_crds NAME...: until each CustomResourceDefinition is Established (60 s at most)
  local c i
  for c in "$@"; do
    for i in $(seq 60); do
      [ "$(K get crd "$c" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ] && break
      (( i < 60 )) || { echo "error: CRD $c is not established after 60 s" >&2; return 1; }
      sleep 1
    done
  done
}

up_chart_server() {
  restart_if_loaded chart-server deployment/chart-server gitops-charts || true
  subst "$GITOPS_DIR/manifests/chart-server.yaml" | K apply -f - >/dev/null
  K -n gitops-charts get configmap charts >/dev/null 2>&1 || charts
  wait_ready gitops-charts deployment/chart-server
}

up_flux() {
  say "flux: CRDs, RBAC and the controllers (source-controller $FLUX_SOURCE_VERSION, helm-controller $FLUX_HELM_VERSION)"
  restart_if_loaded flux-source-controller deployment/source-controller flux-system || true
  restart_if_loaded flux-helm-controller deployment/helm-controller flux-system || true
  K apply --server-side --force-conflicts -f "$FLUX_CRDS" >/dev/null
  wait_crds helmreleases.helm.toolkit.fluxcd.io helmrepositories.source.toolkit.fluxcd.io helmcharts.source.toolkit.fluxcd.io
  subst "$GITOPS_DIR/manifests/flux.yaml" | K apply -f - >/dev/null
  wake flux-system
  wait_ready flux-system deployment/source-controller deployment/helm-controller
}

up_argocd() {
  say "argocd: core install $ARGOCD_VERSION (application controller, repo server, redis)"
  K create namespace argocd --dry-run=client -o yaml | K apply -f - >/dev/null
  restart_if_loaded argocd-redis deployment/argocd-redis argocd || true
  if load_image argocd "${ARCHIVES[argocd]}"; then
    K -n argocd get deployment/argocd-repo-server >/dev/null 2>&1 && K -n argocd rollout restart deployment/argocd-repo-server statefulset/argocd-application-controller >/dev/null
  fi
  K apply -n argocd --server-side --force-conflicts -f "$ARGOCD_MANIFEST" >/dev/null
  wait_crds applications.argoproj.io appprojects.argoproj.io
  K apply -f "$GITOPS_DIR/manifests/argocd-default-project.yaml" >/dev/null
  wake argocd
  wait_ready argocd deployment/argocd-redis deployment/argocd-repo-server statefulset/argocd-application-controller
}

up() {
  local what=${1:-all}
  need_tools
  K version >/dev/null 2>&1 || { echo "error: no cluster answers (KUBECONFIG=${KUBECONFIG:-}); make cluster first" >&2; exit 1; }
  say "gitops up ($what) on kind cluster $KIND_CLUSTER_NAME; logs in $LOGS (gitops-*.log)"
  build_images "$what"
  up_chart_server
  if [ "$what" = all ] || [ "$what" = flux ]; then up_flux; fi
  if [ "$what" = all ] || [ "$what" = argocd ]; then up_argocd; fi
  say "gitops up: ready. The Helm repository: http://chart-server.gitops-charts.svc.cluster.local (hack/gitops.sh charts refreshes it)"
}

# ---------------------------------------------------------------------------------------------------- charts

charts() {
  need_tools
  local dirs=("$@") c
  if (( ${#dirs[@]} == 0 )); then dirs=("$REPO_ROOT/charts/premigrate"); fi
  # the repository serves only what this run packages, unless GITOPS_CHARTS_KEEP=1 keeps what it served
  if [ "${GITOPS_CHARTS_KEEP:-}" != 1 ]; then rm -f "$REPO"/*.tgz "$REPO/index.yaml"; fi
  for c in "${dirs[@]}"; do
    if grep -q '^dependencies:' "$c/Chart.yaml"; then "$HELM" dependency build --skip-refresh "$c" >/dev/null; fi
    "$HELM" package "$c" -d "$REPO" ${GITOPS_CHART_VERSION:+--version "$GITOPS_CHART_VERSION"} |
      sed 's/^/  /'
  done
  "$HELM" repo index "$REPO"
  local size; size=$(du -cb "$REPO" | tail -1 | cut -f1)
  if (( size > 900000 )); then
    echo "error: the repository ($REPO) holds $size bytes, too much for a ConfigMap: remove old packages" >&2; exit 1
  fi
  K create namespace gitops-charts --dry-run=client -o yaml | K apply -f - >/dev/null
  K -n gitops-charts create configmap charts --from-file="$REPO" --dry-run=client -o yaml |
    K apply --server-side --force-conflicts -f - >/dev/null
  local served=() f
  for f in "$REPO"/*.tgz; do served+=("$(basename "$f")"); done
  say "charts: served ${served[*]} at http://chart-server.gitops-charts.svc.cluster.local"
}

# ---------------------------------------------------------------------------------------------------- down

down() {
  need_tools
  say "gitops down: removing the Flux and Argo CD objects (their releases and apps are uninstalled), then the controllers"
  local r
  for r in helmreleases.helm.toolkit.fluxcd.io applications.argoproj.io; do
    if K get crd "${r}" >/dev/null 2>&1; then
      K delete "$r" --all -A --wait --timeout=120s >/dev/null 2>&1 || {
        say "$r: not gone after 120 s, removing their finalizers"
        K get "$r" -A -o jsonpath='{range .items[*]}{.metadata.namespace}{" "}{.metadata.name}{"\n"}{end}' |
          while read -r ns n; do K -n "$ns" patch "$r" "$n" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null || true; done
      }
    fi
  done
  K delete namespace flux-system argocd gitops-charts --ignore-not-found --wait --timeout=180s >/dev/null
  K get crd -o name | grep -E 'toolkit\.fluxcd\.io|argoproj\.io' | xargs -r "$KUBECTL" delete --wait=false >/dev/null || true
  K delete clusterrolebinding premigrate-flux-source-controller premigrate-flux-helm-controller \
    argocd-application-controller --ignore-not-found >/dev/null
  K delete clusterrole premigrate-flux-source-controller argocd-application-controller --ignore-not-found >/dev/null
  rm -rf "$REPO"
  say "gitops down: done (the image archives stay cached in $GIMG)"
}

# smoke_flux / smoke_argocd: the served chart through each, in its gitops-smoke-* namespace, then removed
smoke_flux() {
  local t0; t0=$(date +%s)
  K apply -f "$GITOPS_DIR/manifests/smoke-flux.yaml" >/dev/null
  if ! K -n gitops-smoke-flux wait helmrelease/premigrate --for=condition=Ready --timeout=600s >/dev/null; then
    K -n gitops-smoke-flux get helmrepository,helmchart,helmrelease,pods >&2; return 1
  fi
  say "smoke flux: $(K -n gitops-smoke-flux get helmrelease premigrate -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}') ($(( $(date +%s) - t0 ))s)"
  K -n gitops-smoke-flux delete helmrelease premigrate --wait --timeout=120s >/dev/null
  K delete namespace gitops-smoke-flux --wait --timeout=120s >/dev/null
}

smoke_argocd() {
  local t0 s i; t0=$(date +%s)
  K apply -f "$GITOPS_DIR/manifests/smoke-argocd.yaml" >/dev/null
  # health alone says Healthy before the first sync has started: the sync operation must have succeeded too
  for i in $(seq 300); do
    s=$(K -n argocd get application gitops-smoke-argocd \
      -o jsonpath='{.status.sync.status} {.status.health.status} {.status.operationState.phase}')
    [ "$s" = "Synced Healthy Succeeded" ] && break
    (( i < 300 )) || { K -n argocd get application gitops-smoke-argocd -o yaml | tail -40 >&2; echo "error: $s" >&2; return 1; }
    sleep 2
  done
  say "smoke argocd: Synced, Healthy, sync Succeeded at $(K -n argocd get application gitops-smoke-argocd -o jsonpath='{.status.sync.revision}') ($(( $(date +%s) - t0 ))s)"
  K -n argocd delete application gitops-smoke-argocd --wait --timeout=120s >/dev/null
  K delete namespace gitops-smoke-argocd --ignore-not-found --wait --timeout=120s >/dev/null
}

status() {
  local ns
  for ns in gitops-charts flux-system argocd; do
    echo "== $ns"; K -n "$ns" get deploy,statefulset 2>/dev/null || echo "(not installed)"
  done
}

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

cmd=${1:-}; shift || true
case "$cmd:${1:-all}" in
  build:all | build:flux | build:argocd | up:all | up:flux | up:argocd | smoke:all | smoke:flux | smoke:argocd) ;;
  charts:* | down:* | status:*) ;;
  *) usage; [ -z "$cmd" ] || [ "$cmd" = help ] || [ "$cmd" = -h ] || { echo "error: unknown: $cmd ${1:-}" >&2; exit 2; }; exit 0 ;;
esac
case "$cmd" in
  build)
    need_tools
    t0=$(date +%s); build_images "${1:-all}"
    for n in "${!ARCHIVES[@]}"; do printf '  %-24s %s\n' "$n" "${ARCHIVES[$n]}"; done
    say "gitops build: done in $(( $(date +%s) - t0 ))s" ;;
  up) up "${1:-all}" ;;
  charts) charts "$@" ;;
  down) down ;;
  status) status ;;
  smoke)
    need_tools
    if [ "${1:-all}" != argocd ]; then smoke_flux; fi
    if [ "${1:-all}" != flux ]; then smoke_argocd; fi ;;
  *) usage; [ -z "$cmd" ] || [ "$cmd" = help ] || [ "$cmd" = -h ] || exit 2 ;;
esac
