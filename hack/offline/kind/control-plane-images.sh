#!/usr/bin/env bash
# Writes the image tarballs kubeadm asks for (kube-apiserver, kube-controller-manager, kube-scheduler,
# kube-proxy, etcd, coredns, pause) from the binaries built here, with mkimg: no registry involved.
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"; . "$HACK_DIR/offline/kind/env.sh"
ROOTFS_TAR=$1
R=$KO_BUILD/cp-rootfs; rm -rf "$R"; mkdir -p "$R"; tar -C "$R" -xf "$ROOTFS_TAR"
REG=registry.k8s.io
S=$KO_BUILD/imgstage; rm -rf "$S"; mkdir -p "$S/base/etc" "$S/base/tmp"
# a distroless-like base shared by all images
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$S/base/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$S/base/etc/group"
echo 'hosts: files dns' >"$S/base/etc/nsswitch.conf"
chmod 1777 "$S/base/tmp"
BASE=(-dir "$S/base:/" -layer x)
mk() { "$KO_BIN/mkimg" "$@"; }
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  mk -o "$KO_IMAGES/$c.tar" -tag "$REG/$c:$K8S_VERSION" "${BASE[@]}" -file "$KO_BIN/$c:/usr/local/bin/$c"
done
# kube-proxy needs iptables(-save/-restore) and conntrack: taken with their libraries from the bookworm rootfs
P=$S/kube-proxy; mkdir -p "$P/usr/sbin" "$P/usr/local/bin" "$P/usr/lib/x86_64-linux-gnu"
bins="/usr/sbin/xtables-legacy-multi /usr/sbin/xtables-nft-multi /usr/sbin/conntrack"
for b in $bins; do cp -a "$R$b" "$P$b"; done
cp -a "$R/usr/lib/x86_64-linux-gnu/xtables" "$P/usr/lib/x86_64-linux-gnu/"
# copy_lib PATH: a library as seen inside the rootfs, resolving bookworm's merged-/usr symlinks
copy_lib() {
  local real dir name
  real=$(chroot "$R" readlink -f "$1"); dir=$(chroot "$R" readlink -f "$(dirname "$1")"); name=$dir/$(basename "$1")
  mkdir -p "$P$(dirname "$real")" "$P$dir"
  [ -e "$P$real" ] || cp -a "$R$real" "$P$real"
  [ "$name" = "$real" ] || ln -sfn "$real" "$P$name"
}
libs=$( { for b in $bins; do chroot "$R" ldd "$b"; done
          for l in "$P"/usr/lib/x86_64-linux-gnu/xtables/*.so; do chroot "$R" ldd "/usr/lib/x86_64-linux-gnu/xtables/$(basename "$l")"; done
        } | grep -o '/[^ ]*\.so[^ ]*' | sort -u )
for lib in $libs /lib64/ld-linux-x86-64.so.2; do copy_lib "$lib"; done
ln -sfn usr/lib "$P/lib"; ln -sfn usr/lib64 "$P/lib64"
cp "$KO_BIN/iptables-wrapper" "$P/usr/sbin/iptables-wrapper"
for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do ln -sf iptables-wrapper "$P/usr/sbin/$n"; done
for m in legacy nft; do
  for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sf "xtables-$m-multi" "$P/usr/sbin/${n/tables/tables-$m}"
  done
done
mkdir -p "$P/run" "$P/var/run"; cp "$KO_BIN/kube-proxy" "$P/usr/local/bin/kube-proxy"
mk -o "$KO_IMAGES/kube-proxy.tar" -tag "$REG/kube-proxy:$K8S_VERSION" "${BASE[@]}" -dir "$P:/"
mk -o "$KO_IMAGES/etcd.tar" -tag "$REG/etcd:$ETCD_IMAGE_TAG" "${BASE[@]}" -file "$KO_BIN/etcd:/usr/local/bin/etcd" -file "$S/base/tmp:/var/lib/etcd"
mk -o "$KO_IMAGES/coredns.tar" -tag "$REG/coredns/coredns:$COREDNS_VERSION" "${BASE[@]}" -file "$KO_BIN/coredns:/coredns" -entrypoint /coredns
mk -o "$KO_IMAGES/pause.tar" -tag "$REG/pause:$PAUSE_TAG" -file "$KO_BIN/pause:/pause" -entrypoint /pause -user 65535:65535
# the default StorageClass's provisioner (see hack/offline/hostpath-provisioner), tagged by its source's hash
prov=docker.io/premigrate/hostpath-provisioner:$(key "$HACK_DIR/offline/hostpath-provisioner/main.go")
mk -o "$KO_IMAGES/hostpath-provisioner.tar" -tag "$prov" "${BASE[@]}" -file "$KO_BIN/hostpath-provisioner:/hostpath-provisioner" -entrypoint /hostpath-provisioner
echo "$prov" >"$KO_IMAGES/hostpath-provisioner.ref"
rm -rf "$R" "$S"
du -sh "$KO_IMAGES"/*.tar
