#!/usr/bin/env bash
# Builds premigrate's images as docker-archive tarballs, offline (no base image is pulled: mkimg writes the
# layers itself), into $PREMIGRATE_CACHE/images. The test harness and the demo load them into kind.
#   ghcr.io/premigrate/gate:<appVersion>         static /gate, nonroot, no shell
#   ghcr.io/premigrate/demo:v1..v8, :<appVersion> static /demo, nonroot, no shell; each tag sets DEMO_VERSION
#   ghcr.io/premigrate/postgres:15               Debian bookworm's PostgreSQL 15 with the official image's interface
#                                        (also premigrate/postgres:15, its name in the previous release's chart)
#   premigrate/ledger:<its appVersion>   the adopter example's app (examples/ledger)
#   premigrate/bench-poller:dev          kubectl polling every 2 s: the baseline of make bench
#   premigrate/registry:dev              distribution's OCI registry (bin/registry): the release is pushed to it on kind
#   premigrate/gate, premigrate/demo at the previous release's appVersion (hack/previous-release)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUT=$PREMIGRATE_CACHE/images; mkdir -p "$OUT"
# an archive of an earlier appVersion would load a stale tag (only ours: hack/gitops.sh caches its own here)
rm -f "$OUT"/gate.tar "$OUT"/demo-*.tar "$OUT"/postgres.tar "$OUT"/ledger.tar "$OUT"/bench-poller.tar "$OUT"/registry.tar "$OUT"/previous-*.tar
W=$PREMIGRATE_CACHE/build/images; rm -rf "$W"; mkdir -p "$W"
APP_VERSION=$(chart_field "$REPO_ROOT/charts/premigrate" appVersion 2>/dev/null || true)
APP_VERSION=${APP_VERSION:-0.1.0}
# IMAGE_SET=demo builds only what `make demo` deploys: the gate, demo v1 and v2, PostgreSQL
IMAGE_SET=${IMAGE_SET:-all}
case $IMAGE_SET in all) DEMO_VERSIONS=${DEMO_VERSIONS:-8} ;; demo) DEMO_VERSIONS=2 ;;
  *) echo "error: IMAGE_SET=$IMAGE_SET is not one of all, demo" >&2; exit 2 ;; esac
PATH_ENV=PATH=/usr/local/bin:/usr/bin:/bin

cd "$REPO_ROOT"
go build -trimpath -o "$W/mkimg" ./hack/mkimg
# what ships is built from the root module alone (GOWORK=off), as hack/release builds it: go.work's other
# modules (the proof, the workshop) must not choose a version of anything in these binaries
for c in gate demo postgres-init; do
  GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$APP_VERSION" -o "$W/$c" "./cmd/$c"
done
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$W/bench-poller" ./hack/bench-poller
GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$W/ledger" ./examples/ledger/app

# -base: every image starts with hack/imagebuild's distroless-like base layer (passwd and group with nonroot
# 65532 and postgres 999, nsswitch.conf, a sticky /tmp), the one `make release` ships
mk() { "$W/mkimg" "$@" >/dev/null; }

mk -o "$OUT/gate.tar" -tag "ghcr.io/premigrate/gate:$APP_VERSION" -base -file "$W/gate:/gate" \
  -entrypoint /gate -user 65532:65532 -env "$PATH_ENV"
say "image ghcr.io/premigrate/gate:$APP_VERSION ($(du -h "$W/gate" | cut -f1) binary)"
demo_image() { # demo_image TAG DEMO_VERSION
  mk -o "$OUT/demo-$1.tar" -tag "ghcr.io/premigrate/demo:$1" -base -file "$W/demo:/demo" -entrypoint /demo \
    -user 65532:65532 -env "$PATH_ENV" -env "DEMO_VERSION=$2"
}
for v in $(seq 1 "$DEMO_VERSIONS"); do demo_image "v$v" "$v"; done
demo_image "$APP_VERSION" 1
say "images ghcr.io/premigrate/demo:v1..v$DEMO_VERSIONS (v1 also :$APP_VERSION)"

# PostgreSQL: SIGINT stops it (a fast shutdown, as the official image does: SIGTERM would wait for every
# client to disconnect). Debian's postgresql-15 files from this (bookworm) host, with every library they load,
# /bin/sh (initdb runs the server through popen) and the zoneinfo the Debian build uses.
apt_install postgresql-15
PG=/usr/lib/postgresql/15
P=$W/postgres; mkdir -p "$P/usr/local/bin" "$P/var/run/postgresql" "$P/var/lib/postgresql/data"
for d in "$PG" /usr/share/postgresql/15 /usr/share/zoneinfo; do mkdir -p "$P$(dirname "$d")"; cp -a "$d" "$P$d"; done
mkdir -p "$P/usr/bin"; cp -L /bin/dash "$P/usr/bin/dash"
ln -sf dash "$P/usr/bin/sh"
libs=$( { for f in "$PG"/bin/* "$PG"/lib/*.so /bin/dash; do ldd "$f" 2>/dev/null || true; done; } \
        | grep -o '/[^ ]*\.so[^ ]*' | sort -u )
for lib in $libs /lib64/ld-linux-x86-64.so.2; do
  real=$(readlink -f "$lib"); mkdir -p "$P/usr$(dirname "${real#/usr}")"
  cp -aL "$real" "$P/usr${real#/usr}"
  name=$(readlink -f "$(dirname "$lib")")/$(basename "$lib"); name=/usr${name#/usr}
  [ "$name" = "/usr${real#/usr}" ] || { mkdir -p "$P$(dirname "$name")"; ln -sfn "/usr${real#/usr}" "$P$name"; }
done
ln -sfn usr/lib "$P/lib"; ln -sfn usr/lib64 "$P/lib64"; ln -sfn usr/bin "$P/bin"
cp "$W/postgres-init" "$P/usr/local/bin/postgres-init"
# no chown in the image layers: the directories postgres writes to are world-writable and sticky
chmod 1777 "$P/var/run/postgresql" "$P/var/lib/postgresql/data"
# also named premigrate/postgres:15, the name the previous release's chart renders (hack/previous-release)
mk -o "$OUT/postgres.tar" -tag ghcr.io/premigrate/postgres:15 -tag premigrate/postgres:15 -base -dir "$P:/" \
  -entrypoint /usr/local/bin/postgres-init -user 999:999 -stop-signal SIGINT \
  -env "PATH=/usr/local/bin:$PG/bin:/usr/bin:/bin" -env PGDATA=/var/lib/postgresql/data -env LANG=C.UTF-8
say "image ghcr.io/premigrate/postgres:15 (also premigrate/postgres:15)"

if [ "$IMAGE_SET" = all ]; then
# the adopter example's app (examples/ledger), its version from its chart
LEDGER_VERSION=$(chart_field "$REPO_ROOT/examples/ledger/chart" appVersion)
mk -o "$OUT/ledger.tar" -tag "premigrate/ledger:$LEDGER_VERSION" -base -file "$W/ledger:/ledger" \
  -entrypoint /ledger -user 65532:65532 -env "$PATH_ENV"
say "image premigrate/ledger:$LEDGER_VERSION (the adopter example)"

# the benchmark's baseline: kubectl polling every 2 s, as the common wait-for init container does
KUBECTL=$REPO_ROOT/bin/kubectl
[ -x "$KUBECTL" ] || { echo "error: $KUBECTL is missing: run make tools" >&2; exit 1; }
mk -o "$OUT/bench-poller.tar" -tag premigrate/bench-poller:dev -base -file "$W/bench-poller:/bench-poller" \
  -file "$(readlink -f "$KUBECTL"):/usr/local/bin/kubectl" -entrypoint /bench-poller -user 65532:65532 -env "$PATH_ENV"
say "image premigrate/bench-poller:dev (baseline for make bench)"

# the registry the cluster tests push `make release` to, and the nodes pull from (hack/tools.sh builds it)
REGISTRY_BIN=$REPO_ROOT/bin/registry
[ -x "$REGISTRY_BIN" ] || { echo "error: $REGISTRY_BIN is missing: run make tools" >&2; exit 1; }
mk -o "$OUT/registry.tar" -tag premigrate/registry:dev -base -file "$(readlink -f "$REGISTRY_BIN"):/registry" \
  -entrypoint /registry -user 65532:65532 -env "$PATH_ENV"
say "image premigrate/registry:dev ($(basename "$(readlink -f "$REGISTRY_BIN")"), the release's registry on kind)"

# The previous chart release's gate and demo images, under its appVersion's tags, built from its own
# sources (hack/previous-release): the cluster tests upgrade a release of that chart to this one.
prev_version=$(sed -n 's/^version=//p' "$HACK_DIR/previous-release")
prev_commit=$(sed -n 's/^commit=//p' "$HACK_DIR/previous-release")
if [ "$prev_version" = "$APP_VERSION" ]; then
  echo "error: hack/previous-release names $prev_version, the appVersion of this chart: bump one of them" >&2; exit 1
fi
# PREMIGRATE_HISTORY: a repository with the history when this tree has none (hack/mutants builds from a copy)
HISTORY=${PREMIGRATE_HISTORY:-$REPO_ROOT}
if ! git -C "$HISTORY" cat-file -e "$prev_commit^{commit}" 2>/dev/null; then
  echo "error: the previous release's commit $prev_commit (hack/previous-release) is not in this clone's history (a shallow clone? fetch it: git fetch --unshallow)" >&2
  exit 1
fi
PV=$W/previous; mkdir -p "$PV/src"
git -C "$HISTORY" archive "$prev_commit" go.mod go.sum cmd internal | tar -x -C "$PV/src"
for c in gate demo; do
  (cd "$PV/src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$prev_version" -o "$PV/$c" "./cmd/$c")
done
mk -o "$OUT/previous-gate.tar" -tag "premigrate/gate:$prev_version" -base -file "$PV/gate:/gate" \
  -entrypoint /gate -user 65532:65532 -env "$PATH_ENV"
mk -o "$OUT/previous-demo.tar" -tag "premigrate/demo:$prev_version" -base -file "$PV/demo:/demo" \
  -entrypoint /demo -user 65532:65532 -env "$PATH_ENV" -env "DEMO_VERSION=1"
say "images premigrate/gate:$prev_version and premigrate/demo:$prev_version (the previous release, ${prev_commit:0:12})"
fi
rm -rf "$W"
ls -la "$OUT"
