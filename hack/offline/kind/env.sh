# shellcheck shell=bash
# Settings shared by the node-image build steps. Source it after ../lib.sh.
# one tree per Kubernetes: its binaries are not versioned (the newest keeps the tree it always had)
if [ "${PREMIGRATE_K8S:-newest}" = newest ]; then export KO=$PREMIGRATE_CACHE/kind; else export KO=$PREMIGRATE_CACHE/kind-$K8S_VERSION; fi
export KO_BIN=$KO/out/bin KO_IMAGES=$KO/out/images KO_BUILD=$KO/build
export CGO_ENABLED=0
mkdir -p "$KO_BIN" "$KO_IMAGES" "$KO_BUILD"
