# shellcheck shell=bash
# Settings shared by the node-image build steps. Source it after ../lib.sh.
export KO=$PREMIGRATE_CACHE/kind
export KO_BIN=$KO/out/bin KO_IMAGES=$KO/out/images KO_BUILD=$KO/build
export CGO_ENABLED=0
mkdir -p "$KO_BIN" "$KO_IMAGES" "$KO_BUILD"
