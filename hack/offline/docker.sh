#!/usr/bin/env bash
# Makes sure a Docker daemon answers. A daemon that already answers is used as it is. Otherwise, as root,
# installs Debian's docker.io and starts dockerd by hand (this VM has no systemd), with:
#  - a clean PATH, so docker's containerd 1.6 never runs the containerd 2.x shim we build for the node;
#  - runc-capfilter as the default runtime when this host's capability bounding set lacks capabilities
#    that dockerd 20.10 grants to --privileged containers (kind nodes are privileged).
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

if docker info >/dev/null 2>&1; then
  say "docker: a daemon answers ($(docker info --format '{{.ServerVersion}}' 2>/dev/null))"
  exit 0
fi
need_root "starting dockerd"
apt_install docker.io containerd runc iptables ca-certificates
command -v docker >/dev/null || { echo "error: no docker CLI after installing docker.io" >&2; exit 1; }

# CapBnd short of the full set the kernel knows (cap_last_cap) means dockerd 20.10 --privileged fails.
last=$(cat /proc/sys/kernel/cap_last_cap)
full=$(( (1 << (last + 1)) - 1 ))
bnd=$(( 16#$(awk '/^CapBnd:/{print $2}' /proc/self/status) ))
runtime_cfg=''
if (( (bnd & full) != full )); then
  say "docker: capability bounding set is short (CapBnd=$(printf %x $bnd)); using runc-capfilter"
  CGO_ENABLED=0 go build -C "$REPO_ROOT" -trimpath -ldflags "-s -w" -o /usr/local/sbin/runc-capfilter ./hack/offline/runc-capfilter
  runtime_cfg=', "runtimes": { "runc-capfilter": { "path": "/usr/local/sbin/runc-capfilter" } }, "default-runtime": "runc-capfilter"'
fi
mkdir -p /etc/docker
printf '{ "storage-driver": "overlay2", "log-driver": "json-file"%s }\n' "$runtime_cfg" >/etc/docker/daemon.json

pidfile=$PREMIGRATE_CACHE/dockerd.pid
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  say "docker: dockerd $(cat "$pidfile") runs but does not answer; waiting"
else
  # its own session, and no inherited descriptors: a caller's $(...) must not wait for the daemon to exit
  env -i PATH="$CLEAN_PATH" HOME=/root setsid nohup /usr/sbin/dockerd --host=unix:///var/run/docker.sock \
    </dev/null >>"$LOGS/dockerd.log" 2>&1 3>&- 4>&- 5>&- &
  echo $! >"$pidfile"
  say "docker: started dockerd pid $(cat "$pidfile") (log: $LOGS/dockerd.log)"
fi
for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
docker info >/dev/null 2>&1 || { echo "error: dockerd did not answer in 60 s; see $LOGS/dockerd.log" >&2; tail -20 "$LOGS/dockerd.log" >&2; exit 1; }
say "docker: $(docker info --format 'server {{.ServerVersion}}, runtime {{.DefaultRuntime}}, cgroup v{{.CgroupVersion}}')"
