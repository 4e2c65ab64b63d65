#!/usr/bin/env bash
# A Debian bookworm minbase root filesystem with the packages kind's base image installs, plus Debian's runc
# and CNI plugins. bookworm, not trixie: its systemd 252 still runs on a cgroup v1 host.
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"; . "$HACK_DIR/offline/kind/env.sh"
OUT=$KO/out/rootfs-base-$(key "${BASH_SOURCE[0]}").tar
[ -f "$OUT" ] && { echo "cached: $OUT"; exit 0; }
R=$KO_BUILD/rootfs-base; rm -rf "$R"; mkdir -p "$R"
PKGS=systemd,systemd-sysv,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz
PKGS=$PKGS,fuse-overlayfs,e2fsprogs,bash,ca-certificates,curl,jq,procps,runc,containernetworking-plugins,iputils-ping
# the mirror this machine's apt already uses (debootstrap's default otherwise)
MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
debootstrap --variant=minbase --include="$PKGS" bookworm "$R" ${MIRROR:-}
# the same clean-up as kind's base image
chroot "$R" /bin/sh -c '
  find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
  rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
        /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
        /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >> /etc/systemd/journald.conf
  apt-get clean; rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc/* /usr/share/man/* /var/log/*.log
'
tar -C "$R" --numeric-owner -cf "$OUT.tmp" . && mv "$OUT.tmp" "$OUT"
rm -rf "$R"; du -sh "$OUT"
