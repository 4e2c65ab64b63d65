#!/usr/bin/env bash
# Builds the release, offline, into the OCI image layout dist/oci (make release), each reference named where it is
# published (what the charts' defaults and the library's README name; `hack/release push` copies them there):
#   ghcr.io/premigrate/gate:<appVersion>, ghcr.io/premigrate/demo:<appVersion>   image indexes, linux/amd64 + arm64
#   ghcr.io/premigrate/postgres:15                        the same, when Debian's packages are reachable
#   ghcr.io/premigrate/charts/premigrate:<version>        the packaged chart as Helm's OCI artifact
#   ghcr.io/premigrate/charts/premigrate-lib:<version>    the library chart, the same way
# and the packaged charts themselves, dist/premigrate-<version>.tgz, dist/premigrate-lib-<version>.tgz. Nothing is pulled: the
# images are written by hack/release, PostgreSQL comes from Debian bookworm's packages of each architecture.
#   RELEASE_POSTGRES=auto (default: PostgreSQL when Debian's amd64 and arm64 packages are reachable), 1 (must), 0 (never)
#   RELEASE_DIST=<folder> instead of dist/
# `go run ./hack/release push` copies the layout to ghcr.io/premigrate (the release workflow), or --to a mirror.
# Then hack/release verify checks both platforms of every index and the binaries' ELF machine.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
RELEASE_POSTGRES=${RELEASE_POSTGRES:-auto}
# RELEASE_DIST: where the layout and the packaged charts go (the cluster tests build theirs in the cache)
DIST=${RELEASE_DIST:-$REPO_ROOT/dist}; OUT=$DIST/oci
W=$PREMIGRATE_CACHE/build/release DEBS=$PREMIGRATE_CACHE/release/debs
CHART=charts/premigrate LIB=charts/premigrate-lib
APP_VERSION=$(chart_field "$CHART" appVersion) CHART_VERSION=$(chart_field "$CHART" version)
LIB_VERSION=$(chart_field "$LIB" version)
[ -n "$APP_VERSION" ] && [ -n "$CHART_VERSION" ] && [ -n "$LIB_VERSION" ] || {
  echo "error: no version/appVersion in $CHART/Chart.yaml, or no version in $LIB/Chart.yaml" >&2; exit 1; }
# every timestamp in the layout is the last commit's: the same commit gives the same digests
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH
say "release: chart $CHART_VERSION, appVersion $APP_VERSION, timestamps $(date -u -d "@$SOURCE_DATE_EPOCH" +%FT%TZ)"

mkdir -p "$DIST"
rm -f "$DIST/premigrate-$CHART_VERSION.tgz" "$DIST/premigrate-lib-$LIB_VERSION.tgz"
step release-chart-package sh -c "bin/helm dependency build --skip-refresh $CHART && bin/helm package $CHART -d '$DIST' && bin/helm package $LIB -d '$DIST'"
TGZ=$DIST/premigrate-$CHART_VERSION.tgz LIB_TGZ=$DIST/premigrate-lib-$LIB_VERSION.tgz
for f in "$TGZ" "$LIB_TGZ"; do [ -f "$f" ] || { echo "error: helm package wrote no $f" >&2; exit 1; }; done

# ---- PostgreSQL 15 root filesystems, one per architecture, from Debian's packages ----
# The file set of hack/images.sh (the server and client of /usr/lib/postgresql/15, /usr/share/postgresql/15,
# the zoneinfo, dash as /bin/sh, every library they load and the dynamic loader), here taken from the .deb files of
# each architecture (apt-get download, dpkg-deb -x) instead of the host's installation: ldd cannot run arm64
# binaries, so the libraries are found by their ELF NEEDED entries (readelf), and both architectures get the same
# PostgreSQL version.
NATIVE=$(dpkg --print-architecture 2>/dev/null || echo none)
triplet() { case $1 in amd64) echo x86_64-linux-gnu ;; arm64) echo aarch64-linux-gnu ;; esac; }
loader() { case $1 in amd64) echo /lib64/ld-linux-x86-64.so.2 ;; arm64) echo /lib/ld-linux-aarch64.so.1 ;; esac; }
qual() { if [ "$1" = "$NATIVE" ]; then echo "$2"; else echo "$2:$1"; fi; } # qual ARCH PKG

postgres_reachable() {
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null && command -v readelf >/dev/null || {
    say "PostgreSQL: left out (needs Debian's apt-get, dpkg-deb and readelf)"; return 1; }
  if ! dpkg --print-foreign-architectures | grep -qx arm64 && [ "$NATIVE" != arm64 ]; then
    [ "$(id -u)" = 0 ] || { say "PostgreSQL: left out (arm64 is not a dpkg architecture here, and adding it needs root)"; return 1; }
    say "PostgreSQL: adding arm64 to dpkg's architectures (dpkg --add-architecture arm64; apt-get update)"
    dpkg --add-architecture arm64 && apt-get update -qq || { say "PostgreSQL: left out (apt-get update failed)"; return 1; }
  fi
  local a
  for a in amd64 arm64; do
    apt-cache show "$(qual $a postgresql-15)" >/dev/null 2>&1 || {
      say "PostgreSQL: left out (apt knows no postgresql-15 for $a: not Debian bookworm, or its $a packages unreachable)"; return 1; }
  done
}

# pg_debs ARCH: downloads postgresql-15, its client, dash, tzdata and every library package they depend on
# (recursively) for ARCH into $DEBS/ARCH, once per PostgreSQL version
pg_debs() {
  local arch=$1 ver d pkgs
  ver=$(apt-cache policy "$(qual "$arch" postgresql-15)" | awk '/Candidate:/{print $2}')
  d=$DEBS/$arch-$ver
  if [ ! -f "$d/.complete" ]; then
    rm -rf "$d"; mkdir -p "$d"
    pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
             --no-enhances "$(qual "$arch" postgresql-15)" | grep -v '^ ' |
           if [ "$arch" = "$NATIVE" ]; then grep -vE '[<:]'; else sed -n "s/:$arch\$//p" | grep -v '<'; fi |
           grep -E '^(lib|zlib1g$)' | sort -u)
    # apt-get download writes into the current folder; _apt cannot write into root's cache: let root do it
    (cd "$d" && apt-get download -q -o APT::Sandbox::User=root \
        $(for p in postgresql-15 postgresql-client-15 dash $pkgs; do qual "$arch" "$p"; done) tzdata) >&2
    touch "$d/.complete"
  fi
  echo "$d"
}

# pg_rootfs ARCH DEBS OUT: the root filesystem of ghcr.io/premigrate/postgres:15 for ARCH
pg_rootfs() {
  local arch=$1 debs=$2 P=$3 x=$W/extract-$1 t deb lib real f
  t=$(triplet "$arch")
  rm -rf "$x" "$P"; mkdir -p "$x" "$P"
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$x"; done
  PG=/usr/lib/postgresql/15
  for d in "$PG" /usr/share/postgresql/15 /usr/share/zoneinfo; do mkdir -p "$P$(dirname "$d")"; cp -a "$x$d" "$P$d"; done
  mkdir -p "$P/usr/bin" "$P/usr/local/bin" "$P/var/run/postgresql" "$P/var/lib/postgresql/data"
  cp -L "$x/bin/dash" "$P/usr/bin/dash"; ln -sfn dash "$P/usr/bin/sh"
  # inside ROOT PATH: PATH with its symlinks resolved within the extracted tree (relative or absolute)
  inside() {
    local p=$1 n=0 l
    while [ -L "$x$p" ] && (( n++ < 20 )); do
      l=$(readlink "$x$p"); case $l in /*) p=$l ;; *) p=$(dirname "$p")/$l ;; esac
    done
    realpath -ms "$p"
  }
  # find_lib SONAME: the library's file in the extracted tree (Debian's multiarch folders, then PostgreSQL's)
  find_lib() {
    local dir
    for dir in "/lib/$t" "/usr/lib/$t" /lib /usr/lib "$PG/lib"; do
      { [ -e "$x$dir/$1" ] || [ -L "$x$dir/$1" ]; } && { inside "$dir/$1"; return 0; }
    done
    return 1
  }
  # the closure of NEEDED entries, from the binaries, the server's modules and dash
  local -A seen=() ; local queue=() missing=()
  for f in "$x$PG"/bin/* "$x$PG"/lib/*.so "$x/bin/dash"; do [ -L "$f" ] || queue+=("$f"); done
  while (( ${#queue[@]} )); do
    f=${queue[0]}; queue=("${queue[@]:1}")
    for lib in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [ -n "${seen[$lib]:-}" ] && continue
      seen[$lib]=1
      real=$(find_lib "$lib") || { missing+=("$lib"); continue; }
      mkdir -p "$P/usr/lib/$t"
      [ -e "$P$PG/lib/$lib" ] || cp -L "$x$real" "$P/usr/lib/$t/$lib"
      queue+=("$x$real")
    done
  done
  (( ${#missing[@]} == 0 )) || { echo "error: $arch: libraries not in the downloaded packages: ${missing[*]}" >&2; return 1; }
  real=$(inside "$(loader "$arch")"); mkdir -p "$P/usr$(dirname "$(loader "$arch")")"
  cp -L "$x$real" "$P/usr$(loader "$arch")"
  ln -sfn usr/lib "$P/lib"; ln -sfn usr/bin "$P/bin"
  [ "$arch" = amd64 ] && ln -sfn usr/lib64 "$P/lib64"
  # no chown in the image layers: the folders postgres writes to are world-writable and sticky
  chmod 1777 "$P/var/run/postgresql" "$P/var/lib/postgresql/data"
  rm -rf "$x"
  echo "$arch: postgresql-15 $(basename "$debs" | sed "s/^$arch-//"), ${#seen[@]} libraries, $(du -sh "$P" | cut -f1)"
}

PG_FLAGS=()
case $RELEASE_POSTGRES in
  0) say "PostgreSQL: left out (RELEASE_POSTGRES=0)" ;;
  1|auto)
    if postgres_reachable; then
      rm -rf "$W"; mkdir -p "$W"
      for a in amd64 arm64; do
        debs=$(pg_debs "$a" 2>"$LOGS/release-debs-$a.log") || { tail -n 20 "$LOGS/release-debs-$a.log" >&2; exit 1; }
        [ "$a" = amd64 ] && v_amd=${debs##*/amd64-}
        [ "$a" = arm64 ] && [ "${debs##*/arm64-}" != "$v_amd" ] && {
          echo "error: Debian's postgresql-15 is $v_amd for amd64 but ${debs##*/arm64-} for arm64 (a mirror in sync?)" >&2; exit 1; }
        step "release-postgres-rootfs-$a" pg_rootfs "$a" "$debs" "$W/postgres-$a"
        tail -n 1 "$LOGS/release-postgres-rootfs-$a.log" | sed 's/^/  /'
        PG_FLAGS+=(--postgres-rootfs-"$a" "$W/postgres-$a")
      done
    elif [ "$RELEASE_POSTGRES" = 1 ]; then
      echo "error: RELEASE_POSTGRES=1 but Debian's PostgreSQL packages for amd64 and arm64 are not reachable" >&2; exit 1
    fi ;;
  *) echo "error: RELEASE_POSTGRES=$RELEASE_POSTGRES is not one of auto, 1, 0" >&2; exit 2 ;;
esac

go build -trimpath -o "$PREMIGRATE_CACHE/build/release-tool" ./hack/release
step release-build "$PREMIGRATE_CACHE/build/release-tool" build --out "$OUT" --app-version "$APP_VERSION" \
  --chart "$TGZ" --chart "$LIB_TGZ" "${PG_FLAGS[@]}"
verify=(--layout "$OUT" --app-version "$APP_VERSION" --chart-version "$CHART_VERSION" --library-version "$LIB_VERSION")
(( ${#PG_FLAGS[@]} )) && verify+=(--require-postgres)
"$PREMIGRATE_CACHE/build/release-tool" verify "${verify[@]}"
rm -rf "$W" "$PREMIGRATE_CACHE/build/release-tool"
say "release: OCI layout $OUT ($(du -sh "$OUT" | cut -f1), $(find "$OUT/blobs" -type f | wc -l) blobs), charts $TGZ $LIB_TGZ"
grep -o '"org.opencontainers.image.ref.name": *"[^"]*"' "$OUT/index.json" | cut -d'"' -f4 | sed 's/^/  /'
